"""Batch evaluation speed and memory, measured in one run against the local server.

1. Throughput: 2,000 evaluations at concurrency 32 against a server that takes 50 ms per answer.
   The limit is 32 / 0.05 s = 640 evaluations/s; the figure is the fraction of it reached
   (goal >= 0.9), for the sync client (threads, what ``composo evaluate`` uses), the async one
   as it comes (on one ``httpx.AsyncClient``), and the async one on a single
   httpx connection pool, for comparison.
2. Memory: peak resident memory while streaming 10,000 and then 100,000 items through
   ``evaluate_many_iter`` (each size in a fresh process); goal: ratio <= 1.1.

The server runs in its own process (``python -m composo serve``), as it would in real use, so the
client's figures are not diluted by the server sharing its interpreter; both share this machine's
cores. ``--quick`` scales everything down tenfold for a smoke run.

    python benchmarks/bench_batch.py [--quick] [--throughput-only]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import httpx

from composo import AsyncComposo, Composo

CRITERION = "Reward answers that explain the refund policy"
LATENCY = 0.05
CONCURRENCY = 32


def item(i: int) -> dict[str, Any]:
    return {
        "id": f"item-{i}",
        "messages": [
            {"role": "user", "content": f"Ticket {i}: how do refunds work for returned boots?"},
            {"role": "assistant", "content": "Unused items within 30 days get a full refund."},
        ],
    }


def items(n: int) -> Iterator[dict[str, Any]]:
    return (item(i) for i in range(n))


class Server:
    """``composo serve`` in a subprocess on a free loopback port."""

    def __init__(self, latency: float) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.api_key = "bench-key"
        self.args = [
            sys.executable, "-m", "composo", "serve", "--port", str(self.port),
            "--api-key", self.api_key, "--latency", str(latency), "--no-access-log",
        ]  # fmt: skip

    def __enter__(self) -> Server:
        self.proc = subprocess.Popen(self.args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if httpx.get(self.base_url + "/api/healthcheck", timeout=0.5).status_code == 200:
                    return self
            except httpx.HTTPError:
                time.sleep(0.05)
        raise RuntimeError("the local server did not start")

    def __exit__(self, *exc: object) -> None:
        self.proc.terminate()
        self.proc.wait(10)


def sync_rate(srv: Server, n: int) -> float:
    with Composo(
        api_key=srv.api_key, base_url=srv.base_url, max_concurrent_requests=CONCURRENCY
    ) as client:
        client.evaluate(messages=item(0)["messages"], criteria=CRITERION)  # warm up
        start = time.perf_counter()
        done = sum(r.ok for r in client.evaluate_many_iter(items(n), CRITERION))
        elapsed = time.perf_counter() - start
    assert done == n, f"{n - done} evaluations failed"
    return n / elapsed


def async_rate(srv: Server, n: int, one_pool: bool = False) -> float:
    async def go() -> float:
        pool = httpx.Limits(max_connections=CONCURRENCY, max_keepalive_connections=CONCURRENCY)
        http = httpx.AsyncClient(limits=pool) if one_pool else None
        async with AsyncComposo(
            api_key=srv.api_key,
            base_url=srv.base_url,
            max_concurrent_requests=CONCURRENCY,
            http_client=http,
        ) as client:
            await client.evaluate(messages=item(0)["messages"], criteria=CRITERION)
            start = time.perf_counter()
            done = 0
            async for r in client.evaluate_many_iter(items(n), CRITERION):
                done += r.ok
            elapsed = time.perf_counter() - start
        if http is not None:
            await http.aclose()
        assert done == n, f"{n - done} evaluations failed"
        return n / elapsed

    return asyncio.run(go())


def one_pool_rate(srv: Server, n: int) -> float:
    return async_rate(srv, n, one_pool=True)


def memory_child(base_url: str, api_key: str, n: int) -> None:
    """Run in a fresh process: stream ``n`` items and report peak RSS before and after."""
    with Composo(api_key=api_key, base_url=base_url, max_concurrent_requests=CONCURRENCY) as c:
        c.evaluate(messages=item(0)["messages"], criteria=CRITERION)
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        done = sum(r.ok for r in c.evaluate_many_iter(items(n), CRITERION))
        after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"n": n, "ok": done, "before_kib": before, "peak_kib": after}))


def peak_memory(srv: Server, n: int) -> dict[str, int]:
    out = subprocess.run(
        [sys.executable, __file__, "--memory-child", str(n), srv.base_url, srv.api_key],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    figures: dict[str, int] = json.loads(out.stdout.strip().splitlines()[-1])
    assert figures["ok"] == n, f"{n - figures['ok']} evaluations failed"
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a tenth of the sizes")
    parser.add_argument("--throughput-only", action="store_true", help="skip the memory part")
    parser.add_argument("--memory-child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.memory_child:
        n, base_url, api_key = args.memory_child
        memory_child(base_url, api_key, int(n))
        return
    scale = 10 if args.quick else 1
    n = 2_000 // scale
    limit = CONCURRENCY / LATENCY
    print(f"cores: {os.cpu_count()} (shared by client and server)")
    with Server(LATENCY) as srv:
        print(f"throughput, {n} evaluations, concurrency {CONCURRENCY}, server latency 50 ms "
              f"(limit {limit:.0f}/s):")  # fmt: skip
        for name, measure in (
            ("Composo (threads)", sync_rate),
            ("AsyncComposo", async_rate),
            ("AsyncComposo, one pool", one_pool_rate),
        ):
            rate = measure(srv, n)
            print(f"  {name:22} {rate:7.0f}/s  = {rate / limit:.2f} of the limit (goal >= 0.90)")
        print("  (one pool: http_client=httpx.AsyncClient with 32 connections in one pool)")
    if args.throughput_only:
        return
    small, large = 10_000 // scale, 100_000 // scale
    with Server(0.0) as srv:
        a, b = peak_memory(srv, small), peak_memory(srv, large)
    print(f"memory, items streamed through evaluate_many_iter at concurrency {CONCURRENCY}:")
    for f in (a, b):
        grew = (f["peak_kib"] - f["before_kib"]) / 1024
        print(f"  {f['n']:>7} items: peak RSS {f['peak_kib'] / 1024:6.1f} MiB "
              f"(+{grew:.1f} MiB during the run)")  # fmt: skip
    print(f"  ratio {large} / {small}: {b['peak_kib'] / a['peak_kib']:.3f} (goal <= 1.1)")


if __name__ == "__main__":
    main()
