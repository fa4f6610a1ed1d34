"""Checks every API request passes before it is handled: API key and rate limit."""

from __future__ import annotations

import hmac
import math
import time
from collections.abc import Sequence

__all__ = ["KeyCheck", "RateLimiter"]


class KeyCheck:
    """Accepts any key when none is configured; otherwise compares in constant time."""

    def __init__(self, keys: Sequence[str]) -> None:
        self._keys = tuple(k.encode() for k in keys)

    @property
    def open(self) -> bool:
        return not self._keys

    @property
    def keys(self) -> tuple[bytes, ...]:
        """The configured keys (for telling a key apart wherever it turns up, as in a URL)."""
        return self._keys

    def problem(self, presented: bytes | None) -> str | None:
        """Why ``presented`` is refused, or ``None`` when it is accepted."""
        if not self._keys:
            return None
        if not presented:
            return "missing API key: send it in the API-Key header"
        ok = False
        for key in self._keys:
            # Every key is compared, so timing does not reveal which one came close.
            ok |= hmac.compare_digest(presented, key)
        return None if ok else "invalid API key"


class RateLimiter:
    """A token bucket per client (API key, or address when no keys are configured):
    ``per_minute`` requests a minute, bursts up to ``burst`` (default: a minute's worth). Buckets
    that have refilled are dropped, and at most ``max_clients`` are kept (the least recently
    seen go first)."""

    def __init__(
        self, per_minute: float, max_clients: int = 10_000, burst: float | None = None
    ) -> None:
        self.per_minute = per_minute
        self._rate = per_minute / 60.0
        self._capacity = max(1.0, per_minute if burst is None else burst)
        self._max_clients = max_clients
        self._buckets: dict[bytes, tuple[float, float]] = {}
        self._next_sweep = 0.0

    def retry_after(self, key: bytes) -> int:
        """0 when the request may go now (and counts it); otherwise whole seconds to wait."""
        now = time.monotonic()
        tokens, last = self._buckets.pop(key, (self._capacity, now))
        tokens = min(self._capacity, tokens + (now - last) * self._rate)
        self._sweep(now)
        if tokens >= 1.0:
            self._buckets[key] = (tokens - 1.0, now)
            return 0
        self._buckets[key] = (tokens, now)
        return max(1, math.ceil((1.0 - tokens) / self._rate))

    def headers(self, key: bytes) -> list[tuple[bytes, bytes]]:
        """``X-RateLimit-Limit`` (requests a minute), ``-Remaining`` (requests that may go now)
        and ``-Reset`` (whole seconds until one more may go; with nothing remaining, the same
        wait as ``Retry-After``) for ``key``, without counting a request: what a client needs to
        pace itself before it draws a 429."""
        now = time.monotonic()
        tokens, last = self._buckets.get(key, (self._capacity, now))
        tokens = min(self._capacity, tokens + (now - last) * self._rate)
        reset = 0 if tokens >= self._capacity else math.ceil((1.0 - tokens % 1.0) / self._rate)
        return [
            (b"x-ratelimit-limit", f"{self.per_minute:g}".encode()),
            (b"x-ratelimit-remaining", str(math.floor(tokens)).encode()),
            (b"x-ratelimit-reset", str(reset).encode()),
        ]

    def _sweep(self, now: float) -> None:
        """Forget full buckets (a full bucket is the same as none) and keep the table bounded."""
        if now >= self._next_sweep:
            self._buckets = {
                k: (tokens, last)
                for k, (tokens, last) in self._buckets.items()
                if tokens + (now - last) * self._rate < self._capacity
            }
            self._next_sweep = now + 60.0
        while len(self._buckets) >= self._max_clients:
            del self._buckets[next(iter(self._buckets))]  # least recently seen
