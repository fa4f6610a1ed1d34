"""The local server under load, as figures measured in one run.

1. Throughput with the heuristic judge from 200 raw keep-alive clients (goal: at least 1,500
   requests/s, 0 errors), so the server is never the bottleneck of our own batch benchmarks.
2. Memory growth while 150 clients without a key each declare a 10 MiB body and send just under
   it (goal: under 100 MiB; the key is checked before the body is read, which is discarded).

The server runs as its own process (``python -m composo serve``); the load comes from lean
HTTP/1.1 clients on asyncio streams so that the client's own cost stays small. Only 127.0.0.1.
About half a minute.

    python benchmarks/bench_server.py [--seconds 5] [--concurrency 200]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.servers import ServerProcess

GOAL_PER_SECOND = 1500.0
GOAL_MEMORY_MIB = 100.0
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


def post_head(path: str, length: int, key: str | None = KEY) -> bytes:
    """The head of a JSON POST declaring ``length`` body bytes (no API key with ``key=None``)."""
    auth = f"API-Key: {key}\r\n" if key is not None else ""
    return (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{auth}"
        f"Content-Type: application/json\r\nContent-Length: {length}\r\n\r\n"
    ).encode()


async def read_response(reader: asyncio.StreamReader) -> int:
    """Read one whole response off a keep-alive connection; its status."""
    status_line = await reader.readline()
    length = 0
    while True:
        line = await reader.readline()
        if line in (b"\r\n", b""):
            break
        if line[:15].lower() == b"content-length:":
            length = int(line[15:])
    await reader.readexactly(length)
    return int(status_line.split()[1])


async def worker(
    port: int, path: str, body: bytes, stop_at: float, latencies: list[float], errors: list[int]
) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    request = post_head(path, len(body)) + body
    try:
        while time.perf_counter() < stop_at:
            t0 = time.perf_counter()
            writer.write(request)
            status = await read_response(reader)
            latencies.append(time.perf_counter() - t0)
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


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


class PeakRSS:
    """Samples a process's resident memory every 20 ms in a thread; keeps the peak."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.peak = rss_mib(pid)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.wait(0.02):
            self.peak = max(self.peak, rss_mib(self.pid))

    def __enter__(self) -> PeakRSS:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


async def keyless_upload(port: int, size: int) -> str:
    """Declare ``size`` bytes without a key and send all but 1 KiB of them; what came back."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(post_head("/api/v1/evals/reward", size, key=None))
    chunk = b"x" * (256 * 1024)
    sent = 0
    status = "no answer"
    try:
        while sent < size - 1024:
            writer.write(chunk[: min(len(chunk), size - 1024 - sent)])
            sent += min(len(chunk), size - 1024 - sent)
            await writer.drain()
        line = await asyncio.wait_for(reader.readline(), 30)
        status = line.decode().split(" ")[1] if line else "closed"
    except (ConnectionError, asyncio.TimeoutError):
        status = "closed"
    finally:
        writer.close()
    return status


async def memory_attack(port: int, clients: int, size: int) -> dict[str, int]:
    statuses = await asyncio.gather(*(keyless_upload(port, size) for _ in range(clients)))
    out: dict[str, int] = {}
    for s in statuses:
        out[s] = out.get(s, 0) + 1
    return out


def server(db: Path) -> ServerProcess:
    """The server as its own process, with the benchmark's key and no access log."""
    return ServerProcess(api_keys=(KEY,), dev_faults=False, db=db, extra_args=["--no-access-log"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--concurrency", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        with server(Path(tmp) / "bench.sqlite3") as srv:
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
                    f"{name:18s} {r['rps']:8.0f} requests/s  p50 {r['p50']:6.1f} ms  "
                    f"p99 {r['p99']:6.1f} ms  ({int(r['n'])} requests, {int(r['errors'])} errors)"
                    f"  ratio to goal {r['rps'] / GOAL_PER_SECOND:.2f}x "
                    f"(goal {GOAL_PER_SECOND:.0f}/s, 0 errors)"
                )
        with server(Path(tmp) / "attack.sqlite3") as srv:
            assert srv.proc is not None
            before = rss_mib(srv.proc.pid)
            with PeakRSS(srv.proc.pid) as peak:
                answers = asyncio.run(memory_attack(srv.port, 150, 10 * 1024 * 1024))
            grown = peak.peak - before
            print(
                f"150 keyless 10 MiB uploads: server memory {before:.0f} -> peak {peak.peak:.0f} "
                f"MiB, growth {grown:.1f} MiB  answers {answers}  "
                f"ratio to goal {grown / GOAL_MEMORY_MIB:.2f}x (goal < {GOAL_MEMORY_MIB:.0f} MiB)"
            )


if __name__ == "__main__":
    main()
