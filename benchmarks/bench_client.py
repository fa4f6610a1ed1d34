"""``AsyncComposo`` with 50 requests in flight against raw httpx, as a ratio measured in one run.

The local server (heuristic judge) runs in its own process. Each round sends ``--requests``
reward evaluations with 50 in flight through raw ``httpx.AsyncClient`` POSTs of the same JSON
body (with the API key header) and through ``AsyncComposo(max_concurrent_requests=50).evaluate``;
each round reverses the order of the previous one, so that load from other work on the machine
falls on all sides alike. Raw httpx is measured two ways, and in each round the faster one is
the baseline:

- one ``httpx.AsyncClient`` whose pool holds 50 connections (what most code does), and
- one client per worker, each with a single keep-alive connection (the cheapest httpx can do:
  httpcore's pool works per request in proportion to its size, so a pool of one costs least).

Goal: ``AsyncComposo`` reaches at least 0.8x the baseline's rate. The figure printed is the
median of the per-round ratios, with their range, and each side's client CPU per request (this
process only), which other load on the machine disturbs less than the rates. On a shared
machine the figures are noisy; repeat the run.

    python benchmarks/bench_client.py [--requests 1500] [--rounds 4] [--latency 0]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from composo import AsyncComposo
from tests.support.servers import ServerProcess

IN_FLIGHT = 50
GOAL = 0.8
CRITERION = "Reward answers that explain the refund policy"
QA = [
    {"role": "user", "content": "How do refunds work for returned boots?"},
    {"role": "assistant", "content": "Unused items within 30 days get a full refund."},
]
BODY = {"messages": QA, "evaluation_criteria": CRITERION}


Sender = Callable[[int], Awaitable[object]]


async def _closed_loop(n: int, send: Sender) -> tuple[float, float]:
    """``n`` calls of ``send(worker)`` by ``IN_FLIGHT`` workers: calls per second, and this
    process's CPU seconds per call (the server's work is not counted)."""
    remaining = n

    async def worker(index: int) -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            await send(index)

    gc.collect()
    start, cpu = time.perf_counter(), time.process_time()
    await asyncio.gather(*(worker(i) for i in range(IN_FLIGHT)))
    return n / (time.perf_counter() - start), (time.process_time() - cpu) / n


def _raw_sender(clients: list[httpx.AsyncClient], url: str, key: str) -> Sender:
    """Worker ``i`` posts through ``clients[i % len(clients)]``."""
    headers = {"API-Key": key}

    async def send(index: int) -> object:
        response = await clients[index % len(clients)].post(url, json=BODY, headers=headers)
        response.raise_for_status()
        return response.json()

    return send


def _ours_sender(client: AsyncComposo) -> Sender:
    async def send(index: int) -> object:
        return await client.evaluate(messages=QA, criteria=CRITERION)

    return send


async def run(
    srv: ServerProcess, n: int, rounds: int
) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    url = srv.base_url + "/api/v1/evals/reward"

    def pool(size: int) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            limits=httpx.Limits(max_connections=size, max_keepalive_connections=size),
            timeout=60,
        )

    one = [pool(IN_FLIGHT)]
    each = [pool(1) for _ in range(IN_FLIGHT)]
    ours = AsyncComposo(
        api_key=srv.api_key, base_url=srv.base_url, max_concurrent_requests=IN_FLIGHT
    )
    senders = {
        "raw httpx, one pool of 50": _raw_sender(one, url, srv.api_key),
        "raw httpx, a client per worker": _raw_sender(each, url, srv.api_key),
        "AsyncComposo": _ours_sender(ours),
    }
    # Warm up: every connection opened, plugins and models loaded, the server's caches hot.
    for send in senders.values():
        await _closed_loop(IN_FLIGHT * 4, send)
    rates: dict[str, list[float]] = {name: [] for name in senders}
    cpu: dict[str, list[float]] = {name: [] for name in senders}
    for i in range(rounds):
        names = list(senders)
        if i % 2:
            names.reverse()
        for name in names:
            rate, seconds = await _closed_loop(n, senders[name])
            rates[name].append(rate)
            cpu[name].append(seconds)
    for http in one + each:
        await http.aclose()
    await ours.aclose()
    return rates, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=1500, help="requests per round and side")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--latency", type=float, default=0.0, help="server latency, seconds")
    args = parser.parse_args()
    with ServerProcess(
        dev_faults=False, latency=args.latency, extra_args=["--no-access-log"]
    ) as srv:
        rates, cpu = asyncio.run(run(srv, args.requests, args.rounds))
    print(
        f"cores: {os.cpu_count()} (shared by client and server); {args.requests} requests per "
        f"round, {IN_FLIGHT} in flight, server latency {args.latency * 1000:.0f} ms, "
        f"{args.rounds} rounds"
    )
    for name, values in rates.items():
        print(
            f"  {name:28} median {statistics.median(values):6.0f}/s "
            f"(range {min(values):.0f}-{max(values):.0f}); client CPU per request "
            f"{statistics.median(cpu[name]) * 1e6:.0f} us (min {min(cpu[name]) * 1e6:.0f})"
        )
    ours = rates["AsyncComposo"]
    raws = {k: v for k, v in rates.items() if k != "AsyncComposo"}
    best = max(raws, key=lambda k: statistics.median(raws[k]))
    # Per round: ours against the better raw layout measured in the same round.
    ratios = [o / max(r[i] for r in raws.values()) for i, o in enumerate(ours)]
    print(
        f"AsyncComposo / raw httpx (best per round; {best} is faster overall): median "
        f"{statistics.median(ratios):.2f}x (range {min(ratios):.2f}-{max(ratios):.2f}) "
        f"(goal >= {GOAL}x)"
    )
    per = min(cpu["raw httpx, a client per worker"])
    print(
        f"client CPU per request, AsyncComposo / raw httpx (a client per worker), best rounds: "
        f"{min(cpu['AsyncComposo']) / per:.2f}x (less sensitive to other load than the rates)"
    )


if __name__ == "__main__":
    main()
