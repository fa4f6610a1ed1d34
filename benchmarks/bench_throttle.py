"""A throttled batch finishes everything at about the rate the quota allows.

1. 200 items x 2 criteria at concurrency 16 against the local server limited to 600 requests a
   minute. The server's limiter is a token bucket: 10 requests a second, with bursts of up to
   600 saved up while idle. The benchmark spends the saved burst first, so the 400 requests
   need what the quota itself requires: 400 / 10 = 40 s. Goal: 0 errors and at most 1.15x.
2. Leaving a hold: 10 items on two slots (100 ms a verdict) whose first request draws a 429
   with ``Retry-After: 3``. Nothing can go for 3 s; after that the batch should go as fast as
   without the 429. Goal: at most 1.3x (3 s + the unthrottled time).
3. A server refusing 37% of requests at random (429, no ``Retry-After``: no rate to learn),
   10 threads sharing one client, each calling ``evaluate`` (one retry) for 20 items: the share
   of items scored vs the 63% of requests the server accepts; none may fail for the client's
   own pacing. The same with ``Retry-After: 1`` on each refusal, 5 items a thread (every
   refusal holds the whole client for a second, as the server asked: an item fails only when
   a hold outlasts its timeout).

Run: python benchmarks/bench_throttle.py [quota|hold|random]  (default: all three)
"""

from __future__ import annotations

import random
import sys
import threading
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from composo import APITimeoutError, Composo
from tests.support.echo import Echo
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


def quota() -> None:
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


def _batch(url: str) -> float:
    items = [{"messages": [QA[0], {**QA[1], "content": f"Paris ({i})."}]} for i in range(10)]
    with Composo(api_key="k", base_url=url, max_concurrent_requests=2, timeout=30) as client:
        start = time.monotonic()
        results = client.evaluate_many(items, "Reward accurate answers")
        elapsed = time.monotonic() - start
    assert all(r.ok for r in results), [r.error for r in results if not r.ok][:1]
    return elapsed


def hold() -> None:
    with Echo(latency=0.1) as srv:
        free = _batch(srv.url)
    with Echo(
        script=lambda n, body: (429, {"Retry-After": "3"}) if n == 0 else None, latency=0.1
    ) as srv:
        held = _batch(srv.url)
    bound = 3.0 + free
    print(
        f"after one 429 (Retry-After: 3), 10 items on two slots: {held:.2f} s vs 3 s + "
        f"{free:.2f} s unthrottled -> ratio {held / bound:.3f}x (goal <= 1.3x)"
    )


def _refusing(share: float, retry_after: str | None, seed: int) -> Echo:
    rng = random.Random(seed)
    headers = {"Retry-After": retry_after} if retry_after is not None else {}
    return Echo(
        script=lambda n, body: (429, headers) if rng.random() < share else None, latency=0.02
    )


def random_refusals(retry_after: str | None, per_thread: int, share: float = 0.37) -> None:
    threads = 10
    with (
        _refusing(share, retry_after, seed=7) as srv,
        Composo(api_key="k", base_url=srv.url, max_concurrent_requests=5, timeout=15) as client,
    ):
        scored, paced_out, held, failed = [0], [0], [0], [0]
        lock = threading.Lock()

        def run(t: int) -> None:
            for i in range(per_thread):
                messages = [QA[0], {**QA[1], "content": f"Paris ({t}, {i})."}]
                try:
                    client.evaluate(messages=messages, criteria="Reward accurate answers")
                    outcome = scored
                except APITimeoutError as exc:  # a hold past the timeout is the server's
                    text = str(exc)
                    asked = "as the server asked" in text
                    outcome = held if asked else paced_out if "pace" in text else failed
                except Exception:
                    outcome = failed
                with lock:
                    outcome[0] += 1

        start = time.monotonic()
        workers = [threading.Thread(target=run, args=(t,)) for t in range(threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        elapsed = time.monotonic() - start
        asked = len(srv.arrivals)
    items = threads * per_thread
    accepted = 1.0 - share
    how = f"Retry-After: {retry_after}" if retry_after is not None else "no Retry-After"
    print(
        f"server refusing {share:.0%} at random ({how}), {threads} threads x {per_thread} "
        f"items: {scored[0] / items:.0%} scored ({scored[0] / items / accepted:.2f}x the "
        f"{accepted:.0%} it accepts), {paced_out[0]} failed for the client's own pacing "
        f"(goal 0), {held[0]} held by the server past their timeout, {failed[0]} refused "
        f"twice or out of time; {asked} requests in {elapsed:.1f} s"
    )


def main() -> None:
    which = sys.argv[1:] or ["quota", "hold", "random"]
    if "hold" in which:
        hold()
    if "random" in which:
        random_refusals(None, per_thread=20)
        random_refusals("1", per_thread=5)  # about a request a second: every refusal holds
    if "quota" in which:
        quota()


if __name__ == "__main__":
    main()
