"""Throughput and latency of the local server with the heuristic judge at 50 concurrent clients.

Goal: at least 500 evaluations/s on 2 cores, so the server is never the bottleneck of our own batch
benchmarks. The server runs as its own process (``python -m composo serve``); the load comes from
a lean keep-alive HTTP/1.1 client on asyncio streams so that the client's own cost stays small.

    python benchmarks/bench_server.py [--seconds 5] [--concurrency 50]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.servers import ServerProcess

GOAL_PER_SECOND = 500.0
KEY = "bench-key"

REWARD_BODY = json.dumps(
    {
        "messages": [
            {"role": "system", "content": "You are a helpful travel assistant."},
            {
                "role": "user",
                "content": "What's the weather in Paris this weekend? Should I pack an umbrella?",
            },
            {
                "role": "assistant",
                "content": "Light rain on Saturday, sun on Sunday, around 18C: pack an umbrella.",
            },
        ],
        "evaluation_criteria": "Reward responses that answer every part of the user's question",
    }
).encode()

TRACE_BODY = json.dumps(
    {
        "trace": {
            "root_agent_instance_id": "root",
            "agent_instance_by_id": {
                "root": {
                    "id": "root",
                    "name": "planner",
                    "interactions": [
                        {
                            "input_messages": [
                                {"role": "user", "content": "Book a table for two in Rome"}
                            ],
                            "output_messages": [{"content": "Delegating to the booking agent."}],
                        },
                        "booker",
                    ],
                },
                "booker": {
                    "id": "booker",
                    "name": "booker",
                    "interactions": [
                        {
                            "input_messages": [
                                {"role": "user", "content": "Book a table for two in Rome"}
                            ],
                            "output_messages": [
                                {
                                    "type": "tool_call",
                                    "content": {
                                        "id": "c1",
                                        "name": "book",
                                        "parameters": '{"city": "Rome", "people": 2}',
                                    },
                                }
                            ],
                            "tools_available": [
                                {"name": "book", "description": "Book a table", "parameters": "{}"}
                            ],
                        }
                    ],
                },
            },
        },
        "evaluation_criteria": "Reward agents that complete the user's goal",
    }
).encode()


async def worker(
    port: int, path: str, body: bytes, stop_at: float, latencies: list[float], errors: list[int]
) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    head = (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAPI-Key: {KEY}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode()
    request = head + body
    try:
        while time.perf_counter() < stop_at:
            t0 = time.perf_counter()
            writer.write(request)
            status_line = await reader.readline()
            length = 0
            while True:
                line = await reader.readline()
                if line in (b"\r\n", b""):
                    break
                if line[:15].lower() == b"content-length:":
                    length = int(line[15:])
            await reader.readexactly(length)
            latencies.append(time.perf_counter() - t0)
            status = int(status_line.split()[1])
            if status != 200:
                errors.append(status)
    finally:
        writer.close()


async def load(
    port: int, path: str, body: bytes, seconds: float, concurrency: int
) -> dict[str, float]:
    latencies: list[float] = []
    errors: list[int] = []
    # Warm up (connections, first-request imports), then measure.
    await asyncio.gather(
        *(
            worker(port, path, body, time.perf_counter() + 0.5, [], errors)
            for _ in range(concurrency)
        )
    )
    started = time.perf_counter()
    await asyncio.gather(
        *(
            worker(port, path, body, started + seconds, latencies, errors)
            for _ in range(concurrency)
        )
    )
    elapsed = time.perf_counter() - started
    q = statistics.quantiles(latencies, n=100)
    return {
        "rps": len(latencies) / elapsed,
        "p50": q[49] * 1000,
        "p99": q[98] * 1000,
        "n": len(latencies),
        "errors": len(errors),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--concurrency", type=int, default=50)
    args = parser.parse_args()
    with (
        tempfile.TemporaryDirectory() as tmp,
        ServerProcess(
            api_keys=(KEY,),
            dev_faults=False,
            db=Path(tmp) / "bench.sqlite3",
            extra_args=["--no-access-log"],
        ) as srv,
    ):
        port = srv.port
        print(
            f"local server, heuristic judge, {args.concurrency} concurrent clients, "
            f"{args.seconds:g}s per endpoint, {os.cpu_count()} CPU(s)"
        )
        for name, path, body in (
            ("reward", "/api/v1/evals/reward", REWARD_BODY),
            ("trace (2 agents)", "/api/v1/evals/trace", TRACE_BODY),
        ):
            r = asyncio.run(load(port, path, body, args.seconds, args.concurrency))
            print(
                f"{name:18s} {r['rps']:8.0f} evaluations/s  p50 {r['p50']:6.1f} ms  "
                f"p99 {r['p99']:6.1f} ms  ({int(r['n'])} requests, {int(r['errors'])} errors)  "
                f"ratio to goal {r['rps'] / GOAL_PER_SECOND:.2f}x "
                f"(goal {GOAL_PER_SECOND:.0f}/s)"
            )


if __name__ == "__main__":
    main()
