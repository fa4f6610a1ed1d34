"""A throttled batch finishes everything at about the rate the quota allows.

200 items x 2 criteria at concurrency 16 against the local server limited to 600 requests a
minute. The server's limiter is a token bucket: 10 requests a second, with bursts of up to 600
saved up while idle. The benchmark spends the saved burst first, so the 400 requests need what
the quota itself requires: 400 / 10 = 40 s. Goal: 0 errors and at most 1.15x that time.

Run: python benchmarks/bench_throttle.py
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from composo import Composo
from tests.support.servers import ServerProcess

ITEMS, CRITERIA, CONCURRENCY, PER_MINUTE = 200, 2, 16, 600
QA = [
    {"role": "user", "content": "What's the capital of France?"},
    {"role": "assistant", "content": "The capital of France is Paris."},
]


def spend_the_burst(srv: ServerProcess) -> None:
    """Use up the bucket's saved tokens: every POST counts, even one the API then refuses."""
    with httpx.Client(base_url=srv.base_url, headers={"API-Key": srv.api_key}) as http:
        while http.post("/api/v1/evals/reward", json={}).status_code != 429:
            pass


def main() -> None:
    args = ["--rate-limit", f"{PER_MINUTE}/min"]
    with ServerProcess(dev_faults=False, extra_args=args) as srv:
        items = [
            {"id": str(i), "messages": [QA[0], {**QA[1], "content": f"Paris ({i})."}]}
            for i in range(ITEMS)
        ]
        criteria = [f"Reward accurate answers ({k})" for k in range(CRITERIA)]
        with Composo(
            api_key=srv.api_key, base_url=srv.base_url, max_concurrent_requests=CONCURRENCY
        ) as client:
            client.evaluate(messages=QA, criteria="Reward warm-up")
            spend_the_burst(srv)
            start = time.monotonic()
            results = client.evaluate_many(items, criteria, concurrency=CONCURRENCY)
            elapsed = time.monotonic() - start
            throttled = client._throttle.throttled
    requests = ITEMS * CRITERIA
    needed = requests / (PER_MINUTE / 60.0)
    errors = [r for r in results if r.error is not None]
    print(
        f"{requests} requests at concurrency {CONCURRENCY} under {PER_MINUTE}/min: "
        f"{elapsed:.1f} s vs {needed:.0f} s the quota requires -> ratio {elapsed / needed:.3f}x "
        f"(goal <= 1.15x); errors: {len(errors)} (goal 0); 429 answers waited out: {throttled}"
    )
    if errors:
        print(f"first error: {errors[0].error!r}")


if __name__ == "__main__":
    main()
