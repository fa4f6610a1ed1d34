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
        self._keys = [k.encode() for k in keys]

    @property
    def open(self) -> bool:
        return not self._keys

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
    """A token bucket per API key: ``per_minute`` requests a minute, bursts up to that number."""

    def __init__(self, per_minute: float) -> None:
        self.per_minute = per_minute
        self._rate = per_minute / 60.0
        self._capacity = max(1.0, per_minute)
        self._buckets: dict[bytes, tuple[float, float]] = {}

    def retry_after(self, key: bytes) -> int:
        """0 when the request may go now (and counts it); otherwise whole seconds to wait."""
        now = time.monotonic()
        tokens, last = self._buckets.get(key, (self._capacity, now))
        tokens = min(self._capacity, tokens + (now - last) * self._rate)
        if tokens >= 1.0:
            self._buckets[key] = (tokens - 1.0, now)
            return 0
        self._buckets[key] = (tokens, now)
        return max(1, math.ceil((1.0 - tokens) / self._rate))
