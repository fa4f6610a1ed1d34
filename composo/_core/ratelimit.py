"""One request-rate limiter per client, asked just before each request is sent (holding a
request slot), so what it learns applies to requests already waiting; it only says how long to
wait, the clients sleep.

- A 429's ``Retry-After`` (or a spent quota's reset) holds every request until then, stretched
  a little at random, and the waiting requests leave spread over a short window; a 429 without
  one backs off only its own request.
- A held 429 also slows the pace (AIMD, once per episode); successes regain it, then probe above
  it, and pacing stops once it limits nothing.
- A declared quota (``X-RateLimit-Limit`` a minute, ``-Remaining``) is copied as a bucket no
  request overdraws, so one process draws no 429; ``requests_per_minute`` caps the rate.

A request fails for pacing only when a hold, the quota or ``requests_per_minute`` would keep it
past its deadline, never on the limiter's own guess."""

from __future__ import annotations

import math
import random
import threading
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from composo._core.limits import (
    BACKOFF_BASE,
    BACKOFF_MAX,
    RATE_DECREASE,
    RATE_GROWTH,
    RATE_MEASURE_WINDOW,
    RATE_REGAIN,
    THROTTLE_FORGET,
    THROTTLE_JITTER,
    THROTTLE_RELEASE,
)
from composo.errors import ComposoValidationError

_MIN_RATE = 1 / 3600.0  # one request an hour: the slowest pace kept
_POLL = 0.05  # seconds a paced request waits before asking again (the pace may have grown)


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
    """Seconds until ``X-RateLimit-Reset`` when ``X-RateLimit-Remaining`` is 0, else ``None``.
    The reset is seconds from now, or a Unix time when above a year of seconds (both are used)."""
    remaining = headers.get("x-ratelimit-remaining")
    if remaining is None or remaining.strip() not in ("0", "0.0"):
        return None
    reset = _number(headers.get("x-ratelimit-reset"))
    if reset is None:
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
    """Permission beyond this process (a cluster-wide budget such as
    :class:`composo.ray.RequestBudget`): each sync attempt holds one permit until its answer is
    read."""

    def acquire(self) -> None: ...

    def release(self) -> None: ...


class Throttle:
    """The shared pace of one client's requests: ``rate`` a second (``None``: not pacing),
    ``throttled`` 429s so far, ``permits`` a budget beyond this process each attempt takes."""

    permits: Permits | None = None

    def __init__(self, requests_per_minute: float | None, concurrency: int) -> None:
        self.ceiling = None if requests_per_minute is None else requests_per_minute / 60.0
        self._concurrency = concurrency
        self.reset()

    def reset(self) -> None:
        """A fresh limiter (also in a forked child, where a parent thread's lock may be held)."""
        self.rate: float | None = self.ceiling
        self.throttled = 0
        self._lock = threading.Lock()
        self._last = -math.inf  # when the last request started
        self._hold = 0.0  # no request before this (Retry-After, a spent quota)
        self._release_gap = 0.0  # spacing of the first requests after a hold
        self._release_left = 0
        self._episode = 0.0  # 429s before this belong to the episode already counted
        self._last_429 = 0.0
        self._target: float | None = None  # the rate to regain quickly after an episode
        self._ok: deque[float] = deque(maxlen=256)
        # the declared quota (rate a second, bucket size) and our copy: what remained at _quota_at
        self._quota: tuple[float, float] | None = None
        self._tokens = 0.0
        self._quota_at = 0.0
        self._reset_header: float | None = None
        # requests before the quota was declared: those still in flight will draw on its bucket
        self._blind_started = 0
        self._blind_answered = 0

    def declared(self) -> RateLimits | None:
        """The quota the server declared, ``None`` before an answer said."""
        with self._lock:
            if self._quota is None:
                return None
            left = self._bucket(time.monotonic())
            return RateLimits(self._quota[0] * 60.0, max(0.0, left), self._reset_header)

    def status(self) -> str | None:
        """A short description while pacing (``None`` otherwise), for progress displays."""
        rate, now = self.rate, time.monotonic()
        if rate is None and self._hold <= now:
            return None
        pace = f"{rate * 60:.0f}/min" if rate is not None else "unpaced"
        if self._hold > now:
            return f"throttled: waiting {self._hold - now:.0f}s as the server asked, then {pace}"
        if self._quota is not None and self.rate is None:
            return f"paced to the quota: {self._quota[0] * 60:g}/min"
        if self.throttled and now - self._last_429 < THROTTLE_FORGET:
            return f"throttled: {pace}"
        return f"paced: {pace}"

    def admit(self, deadline: float) -> float | None:
        """``0.0``: the request starts now (and is counted); else the seconds to wait; ``None``: a
        hold, the quota or ``requests_per_minute`` keep it past ``deadline``."""
        if (
            self.rate is None
            and self._hold == 0.0
            and self._quota is None
            and not self._release_left
        ):
            self._blind_started += 1
            return 0.0
        with self._lock:
            now = time.monotonic()
            if self._hold > now:  # only a longer hold can change this wait
                return None if self._hold > deadline else self._hold - now
            hard = now  # what the server or the user declared
            if self.ceiling is not None:
                hard = max(hard, self._last + 1.0 / self.ceiling)
            gap = 0.0 if self.rate is None else 1.0 / self.rate
            if self._release_left:
                gap = max(gap, self._release_gap)
            start = max(hard, self._last + gap)
            if start > deadline:  # the limiter's own guess never fails a request
                start = hard
            tokens = 0.0
            if self._quota is not None:
                tokens = self._bucket(now)
                if tokens < 1.0:  # wait for the bucket to hold the request's share
                    start = max(start, now + (1.0 - tokens) / self._quota[0])
            if start > deadline:
                return None
            if start > now:
                return min(start - now, _POLL)
            if self._quota is not None:
                self._tokens, self._quota_at = tokens - 1.0, now
            else:
                self._blind_started += 1
            self._last = now
            if self._release_left:
                self._release_left -= 1
            if self._hold:
                self._hold = 0.0  # passed: back on the quick path once nothing paces
            return 0.0

    def held(self) -> bool:
        """Whether a hold is in force now (a request admitted before it must wait again)."""
        return self._hold > time.monotonic()

    def passed(self, headers: Mapping[str, str]) -> None:
        """A request succeeded: the pace regains the rate last allowed, then grows slowly; a spent
        quota (``X-RateLimit-Remaining: 0``) holds the next requests until its reset."""
        if (
            "x-ratelimit-remaining" in headers
            and not self.learn(headers)
            and (reset := rate_limit_reset(headers)) is not None
        ):
            with self._lock:  # a spent quota of unknown size: wait for its reset
                self._hold_for(time.monotonic(), reset)
        if self._quota is None:
            self._blind_answered += 1
        if self.rate is None and not self.throttled:
            return
        with self._lock:
            now = time.monotonic()
            self._ok.append(now)
            rate = self.rate
            if rate is None or (self.ceiling is not None and rate >= self.ceiling):
                return
            if self.ceiling is None and self._done_pacing(now, rate):
                self.rate = None
                return
            if self._target is None or rate < self._target:  # regaining: a few successes
                rate *= RATE_REGAIN
                if self._target is not None:
                    rate = min(rate, self._target)
            else:  # probing above what was allowed
                rate += RATE_GROWTH
            self.rate = rate if self.ceiling is None else min(rate, self.ceiling)

    def learn(self, headers: Mapping[str, str]) -> bool:
        """Take a declared quota (``False``: none): the first answer starts our copy of the bucket,
        later ones only lower it (an answer read late predates requests started since)."""
        limit = _number(headers.get("x-ratelimit-limit"))
        remaining = _number(headers.get("x-ratelimit-remaining"))
        if not limit or remaining is None:
            return False
        rate, cap = limit / 60.0, max(1.0, limit)
        with self._lock:
            now = time.monotonic()
            self._reset_header = _number(headers.get("x-ratelimit-reset"))
            if self._quota != (rate, cap):  # first declared, or the quota changed
                # unanswered earlier requests will spend it too (this answer's is answered)
                owed = max(0, self._blind_started - self._blind_answered - 1)
                self._blind_started = self._blind_answered = 0  # counted once, by this copy
                self._quota, self._quota_at = (rate, cap), now
                self._tokens = min(remaining, cap) - owed
                return True
            # The copy as of now, lowered to what the server reports.
            self._tokens, self._quota_at = min(self._bucket(now), remaining), now
        return True

    def _bucket(self, now: float) -> float:
        """What our copy of the declared quota holds at ``now`` (under the lock)."""
        assert self._quota is not None
        rate, cap = self._quota
        return min(cap, self._tokens + max(0.0, now - self._quota_at) * rate)

    def _hold_for(self, now: float, seconds: float) -> None:
        """No request of this client for ``seconds`` (stretched at random by a little)."""
        until = now + seconds * (1.0 + random.uniform(0.0, THROTTLE_JITTER))
        if until > self._hold:
            self._hold = until
            # The requests that waited leave spread over a window, not all at once.
            window = min(THROTTLE_RELEASE, seconds / 2.0)
            self._release_gap = window / self._concurrency
            self._release_left = self._concurrency

    def throttled_by(self, retry_after: float | None, waits: int = 0) -> float:
        """A 429: with ``retry_after`` every request is held and the pace slows (once per
        episode), returning 0.0; without, this request's own jittered backoff after ``waits``."""
        with self._lock:
            now = time.monotonic()
            self.throttled += 1
            if self._quota is None:
                self._blind_answered += 1
            self._last_429 = now
            if retry_after is None:
                return random.uniform(0.0, min(BACKOFF_MAX, BACKOFF_BASE * 2.0**waits))
            self._hold_for(now, retry_after)
            if now >= self._episode:  # a new episode: the first 429 since the last hold ended
                seen = self._measured(now)
                if seen is not None:
                    self._target = seen
                    base = seen if self.rate is None else min(seen, self.rate)
                    rate = max(_MIN_RATE, base * RATE_DECREASE)
                else:  # nothing measured: restart from the release window's pace
                    self._target = None
                    window = max(min(THROTTLE_RELEASE, retry_after / 2.0), 1e-3)
                    rate = self._concurrency / window
                    if self.rate is not None:
                        rate = min(rate, self.rate)
                self.rate = rate if self.ceiling is None else min(rate, self.ceiling)
                self._episode = self._hold
            return 0.0

    def _done_pacing(self, now: float, rate: float) -> bool:
        """No 429 for long, or a pace (back above what was allowed) twice what is sent."""
        if now - self._last_429 > THROTTLE_FORGET:
            return True
        if self._target is not None and rate < self._target:
            return False
        seen = self._measured(now)
        return seen is not None and rate > 2.0 * seen

    def _measured(self, now: float) -> float | None:
        """Successes a second over the recent window, ``None`` with fewer than two."""
        recent = [t for t in self._ok if now - t <= RATE_MEASURE_WINDOW]
        if len(recent) < 2:
            return None
        span = max(now - recent[0], 1e-3)
        return len(recent) / span
