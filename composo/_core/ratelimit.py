"""One request-rate limiter per client, shared by every call, batch and background evaluation
it makes.

Unthrottled it costs two attribute reads per request. After a 429 it paces requests: the rate
drops to a share of what the server was just seen allowing (once per throttling episode) and
grows back about 5% a second while requests succeed (additive increase, multiplicative
decrease). ``Retry-After`` holds every request of the client until then, stretched a little at
random; after the hold, requests leave one at a time, spaced by the rate, never in lockstep.
``requests_per_minute`` paces from the start and caps the rate.

A server that declares its quota (``X-RateLimit-Limit`` a minute, ``X-RateLimit-Remaining``)
is paced from the first answer that says so: the limiter keeps a copy of the server's bucket
(what remains, refilled at the declared rate, corrected down by every later answer) and starts
no request the bucket could not pay for, so a single process draws no 429 at all. AIMD and
``Retry-After`` stay for what the copy cannot see (other processes sharing the key).

The limiter only says how long to wait; the clients sleep (``time.sleep`` or ``asyncio.sleep``).
"""

from __future__ import annotations

import random
import threading
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from composo._core.limits import (
    RATE_DECREASE,
    RATE_GROWTH,
    RATE_MEASURE_WINDOW,
    THROTTLE_FORGET,
    THROTTLE_JITTER,
)
from composo.errors import ComposoValidationError

__all__ = ["Permits", "RateLimits", "Throttle", "check_requests_per_minute", "rate_limit_reset"]

_MIN_RATE = 1 / 3600.0  # one request an hour: the slowest pace kept


def check_requests_per_minute(value: float | None) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ComposoValidationError(
            f"requests_per_minute: must be a positive number (e.g. 500 / 60 for 500 an hour) or "
            f"None for no pacing, got {value!r}"
        )
    return float(value)


def rate_limit_reset(headers: Mapping[str, str]) -> float | None:
    """Seconds until ``X-RateLimit-Reset`` when ``X-RateLimit-Remaining`` says the quota is spent;
    ``None`` otherwise. The reset is read as seconds from now, or as a Unix time when it is
    larger than a year of seconds (both are in use)."""
    remaining = headers.get("x-ratelimit-remaining")
    if remaining is None or remaining.strip() not in ("0", "0.0"):
        return None
    try:
        reset = float(headers.get("x-ratelimit-reset") or "")
    except ValueError:
        return None
    if reset != reset or reset < 0:  # NaN or negative
        return None
    if reset > 365 * 86400.0:
        reset -= time.time()
    return max(0.0, reset)


@dataclass(frozen=True)
class RateLimits:
    """The quota the server declared in its last answer's ``X-RateLimit-*`` headers.

    Attributes:
        requests_per_minute: ``X-RateLimit-Limit``, read as requests a minute.
        remaining: Requests the quota allows now, as this client reckons it.
        reset: ``X-RateLimit-Reset`` of that answer (seconds), if it sent one.
    """

    requests_per_minute: float
    remaining: float
    reset: float | None = None


def _number(text: str | None) -> float | None:
    try:
        value = float(text) if text is not None else None
    except ValueError:
        return None
    return value if value is not None and value == value and value >= 0 else None


class Permits(Protocol):
    """A source of permission beyond this process (a cluster-wide budget, such as
    :class:`composo.ray.RequestBudget`): each attempt holds one permit from before it is sent
    until its answer is read. Blocking calls; the sync client's attempts use them."""

    def acquire(self) -> None: ...

    def release(self) -> None: ...


class Throttle:
    """The shared pace of one client's requests (see the module's description).

    Attributes:
        rate: Requests a second currently allowed; ``None`` while not pacing.
        throttled: 429 answers seen so far.
        permits: Where each attempt also takes a permit (``None``: only this limiter).
    """

    permits: Permits | None = None

    def __init__(self, requests_per_minute: float | None, concurrency: int) -> None:
        self.ceiling = None if requests_per_minute is None else requests_per_minute / 60.0
        self.rate: float | None = self.ceiling
        self.throttled = 0
        self._concurrency = concurrency
        self._next = 0.0  # when the next request may start (pacing)
        self._hold = 0.0  # no request before this (Retry-After)
        self._episode = 0.0  # 429s before this belong to the episode already counted
        self._last_429 = 0.0
        self._ok: deque[float] = deque(maxlen=256)
        self._lock = threading.Lock()
        # The server's declared quota (requests a second, a minute's bucket), and this client's
        # copy of its bucket: what remained at ``_quota_at``.
        self._quota: tuple[float, float] | None = None
        self._tokens = 0.0
        self._quota_at = 0.0
        self._reset: float | None = None
        # Requests started, and answered, before any answer declared the quota: the ones still
        # in flight when it is declared will draw on the bucket it describes.
        self._blind_started = 0
        self._blind_answered = 0

    @property
    def active(self) -> bool:
        """Whether requests are being paced or held."""
        return self.rate is not None or self._hold > time.monotonic()

    def declared(self) -> RateLimits | None:
        """The quota the server declared, ``None`` before an answer said."""
        with self._lock:
            if self._quota is None:
                return None
            rate, cap = self._quota
            now = time.monotonic()
            left = min(cap, self._tokens + (now - self._quota_at) * rate)
            return RateLimits(rate * 60.0, max(0.0, left), self._reset)

    def status(self) -> str | None:
        """A short description while pacing (``None`` otherwise), for progress displays."""
        rate = self.rate
        if rate is None and not self.active:
            return None
        now = time.monotonic()
        pace = f"{rate * 60:.0f}/min" if rate is not None else "unpaced"
        if self._hold > now:
            return f"throttled: waiting {self._hold - now:.0f}s as the server asked, then {pace}"
        if self._quota is not None and self.rate is None:
            return f"paced to the quota: {self._quota[0] * 60:g}/min"
        if self.throttled and now - self._last_429 < THROTTLE_FORGET:
            return f"throttled: {pace}"
        return f"paced: {pace}"

    def delay(self, deadline: float) -> float | None:
        """Seconds to wait before the next request may start, reserving its place; ``None``
        (nothing reserved) when that would pass ``deadline``."""
        if self.rate is None and self._hold == 0.0 and self._quota is None:
            self._blind_started += 1
            return 0.0
        with self._lock:
            now = time.monotonic()
            start = max(now, self._next, self._hold)
            if self._quota is not None:
                rate, cap = self._quota
                start = max(start, self._quota_at)
                tokens = min(cap, self._tokens + (start - self._quota_at) * rate)
                if tokens < 1.0:  # wait for the bucket to hold the request's share
                    start += (1.0 - tokens) / rate
                    tokens = 1.0
                if start > deadline:
                    return None
                self._tokens, self._quota_at = tokens - 1.0, start
            elif start > deadline:
                return None
            else:
                self._blind_started += 1
            if self.rate is not None:
                self._next = start + 1.0 / self.rate
            return start - now

    def passed(self, headers: Mapping[str, str]) -> None:
        """A request succeeded: the rate grows back; a spent quota announced by
        ``X-RateLimit-Remaining: 0`` holds the next requests until its reset."""
        if (
            "x-ratelimit-remaining" in headers
            and not self.learn(headers)
            and (reset := rate_limit_reset(headers)) is not None
        ):
            self.hold(reset)  # a spent quota of unknown size: wait for its reset
        if self._quota is None:
            self._blind_answered += 1
        if self.rate is None and self._hold == 0.0 and not self.throttled:
            return
        with self._lock:
            now = time.monotonic()
            self._ok.append(now)
            if self.rate is None:
                return
            if (
                self.ceiling is None
                and self.throttled
                and now - self._last_429 > THROTTLE_FORGET
                and self._hold < now
            ):
                self.rate = None  # quiet for long enough: stop pacing
                return
            rate = self.rate + RATE_GROWTH
            self.rate = rate if self.ceiling is None else min(rate, self.ceiling)

    def learn(self, headers: Mapping[str, str]) -> bool:
        """Take the quota an answer declared (``X-RateLimit-Limit`` a minute): the first such
        answer starts the copy of the server's bucket at its ``X-RateLimit-Remaining``; later
        ones lower the copy to what they report (never raise it: an answer read late reports a
        bucket that has paid for requests started since). ``False`` when no quota was
        declared."""
        limit = _number(headers.get("x-ratelimit-limit"))
        remaining = _number(headers.get("x-ratelimit-remaining"))
        if not limit or remaining is None:
            return False
        rate, cap = limit / 60.0, max(1.0, limit)
        with self._lock:
            now = time.monotonic()
            self._reset = _number(headers.get("x-ratelimit-reset"))
            if self._quota != (rate, cap):  # first declared, or the quota changed
                # Requests started before this answer and not yet answered will spend the
                # bucket too (this answer's own request is among the answered).
                owed = max(0, self._blind_started - self._blind_answered - 1)
                self._blind_started = self._blind_answered = 0  # counted once, by this copy
                self._quota, self._quota_at = (rate, cap), now
                self._tokens = min(remaining, cap) - owed
                return True
            if self._quota_at < now:  # refill the copy up to now
                self._tokens = min(cap, self._tokens + (now - self._quota_at) * rate)
                self._quota_at = now
            # The copy as of now: below what the last reservation left while requests
            # reserved for later have yet to start.
            mine = self._tokens + (now - self._quota_at) * rate
            if remaining < mine:
                self._tokens -= mine - remaining
        return True

    def hold(self, seconds: float) -> None:
        """No request of this client for ``seconds`` (stretched at random by a little)."""
        with self._lock:
            until = time.monotonic() + seconds * (1.0 + random.uniform(0.0, THROTTLE_JITTER))
            self._hold = max(self._hold, until)

    def throttled_by(self, retry_after: float | None) -> float:
        """A 429 arrived: slow down (once per episode) and hold for the advised wait; returns
        the wait (the server's ``Retry-After``, else one second)."""
        advised = 1.0 if retry_after is None else retry_after
        with self._lock:
            now = time.monotonic()
            self.throttled += 1
            if self._quota is None:
                self._blind_answered += 1
            self._last_429 = now
            hold = now + advised * (1.0 + random.uniform(0.0, THROTTLE_JITTER))
            self._hold = max(self._hold, hold)
            if now >= self._episode:  # a new episode: the first 429 since the last hold ended
                seen = self._measured(now)
                base = seen if seen is not None else self._concurrency / max(advised, 1.0)
                if self.rate is not None:
                    base = min(base, self.rate)
                self.rate = max(_MIN_RATE, base * RATE_DECREASE)
                if self.ceiling is not None:
                    self.rate = min(self.rate, self.ceiling)
                self._episode = self._hold
            return advised

    def _measured(self, now: float) -> float | None:
        """Successes a second over the recent window, ``None`` with fewer than two."""
        recent = [t for t in self._ok if now - t <= RATE_MEASURE_WINDOW]
        if len(recent) < 2:
            return None
        span = max(now - recent[0], 1e-3)
        return len(recent) / span
