"""A batch paced from the quota the server declares draws no 429 and takes the quota's time.

80 items, no concurrency given, against the local server limited to 60 requests a minute. The
server's limiter is a token bucket holding a full minute's requests, refilled at one a second,
and every answer declares it (``X-RateLimit-Limit``, ``-Remaining``, ``-Reset``). A fresh
bucket lets 60 requests go at once; the other 20 need a second each: the quota's time is
(80 - 60) / 1 = 20 s. Goals: no 429 answer at all, and at most 1.15x that time.

For comparison the same batch runs with a client that ignores the declared quota (the rate-limit
headers stripped on the way in, as a server that sends none would be seen): it learns the limit
only from 429 answers, as batch runners without a quota reader do.

Run: python benchmarks/bench_quota.py
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from composo import Composo
from tests.support.quota import NoQuotaHeaders
from tests.support.servers import ServerProcess

ITEMS, PER_MINUTE = 80, 60
QA = [
    {"role": "user", "content": "What's the capital of France?"},
    {"role": "assistant", "content": "The capital of France is Paris."},
]


def run(key: str, srv: ServerProcess, **client_args: Any) -> tuple[float, int, int]:
    """Seconds the batch took, 429 answers it drew and items that failed."""
    items = [
        {"id": str(i), "messages": [QA[0], {**QA[1], "content": f"Paris ({i})."}]}
        for i in range(ITEMS)
    ]
    with Composo(api_key=key, base_url=srv.base_url, timeout=300, **client_args) as client:
        start = time.monotonic()
        results = client.evaluate_many(items, "Reward accurate answers")
        elapsed = time.monotonic() - start
        throttled = client._throttle.throttled
    return elapsed, throttled, sum(r.error is not None for r in results)


def main() -> None:
    keys = ("quota-key-paced-0123", "quota-key-blind-0123")
    args = ["--rate-limit", f"{PER_MINUTE}/min"]
    with ServerProcess(api_keys=keys, dev_faults=False, extra_args=args) as srv:
        paced = run(keys[0], srv)
        with httpx.Client(transport=NoQuotaHeaders()) as blind_http:
            blind = run(keys[1], srv, http_client=blind_http)
    needed = (ITEMS - PER_MINUTE) / (PER_MINUTE / 60.0)
    for name, (elapsed, throttled, failed) in (("quota-paced", paced), ("429-only", blind)):
        print(
            f"{name:>11}: {ITEMS} items under {PER_MINUTE}/min in {elapsed:.1f} s vs "
            f"{needed:.0f} s the quota requires -> ratio {elapsed / needed:.3f}x; "
            f"429 answers: {throttled}; "
            f"failed items: {failed}"
        )
    print("goals (quota-paced): ratio <= 1.15x, 0 answers 429, 0 failed items")


if __name__ == "__main__":
    main()
