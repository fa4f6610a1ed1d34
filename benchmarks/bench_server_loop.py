"""Does the local server's event loop keep answering while a large reward request is judged?

One legal reward request of about 9 MiB (under the 10 MiB default limit) is sent while another
connection polls ``/api/healthcheck`` every 10 ms; the worst healthcheck latency during the
request is printed as a ratio against the goal (300 ms; an idle check takes about 1 ms). Three
shapes, each sent twice in a row: two long turns of prose, many short turns, and one long turn
of a single repeated word (the heuristic judge's worst case for word splitting); then, for
comparison, a 9 MiB trace of 4,000 agents (``bench_server.py``'s).

The server runs as its own process (``python -m composo serve``), on 127.0.0.1 only. About 30 s.

    python benchmarks/bench_server_loop.py [--rounds 2]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.bench_server import big_trace_body, read_response
from tests.support.servers import ServerProcess

GOAL_MS = 300.0
KEY = "bench-key"
TARGET_BYTES = 9 * 1024 * 1024
CRITERION = "Reward responses that answer the user's question with specific facts"


def _body(messages: list[dict[str, str]]) -> bytes:
    return json.dumps({"messages": messages, "evaluation_criteria": CRITERION}).encode()


def two_long_turns() -> bytes:
    text = "lorem ipsum dolor sit amet consectetur adipiscing elit sed do " * 75_000
    return _body([{"role": "user", "content": text}, {"role": "assistant", "content": text}])


def many_short_turns() -> bytes:
    turn = "Could you tell me more about the weather in Paris on the weekend of the fair? " * 5
    n = TARGET_BYTES // (len(turn) + 40)
    roles = ("user", "assistant")
    return _body([{"role": roles[i % 2], "content": f"{i}: {turn}"} for i in range(n)])


def one_long_word() -> bytes:
    word = "a" * (TARGET_BYTES - 4096)
    return _body([{"role": "user", "content": "Why?"}, {"role": "assistant", "content": word}])


def trace_of_4000_agents() -> bytes:
    return big_trace_body(4000, 150)


# name -> (endpoint, body); the trace is for comparison with the reward shapes.
SHAPES = {
    "two long turns": ("reward", two_long_turns),
    "many short turns": ("reward", many_short_turns),
    "one long word": ("reward", one_long_word),
    "trace, 4000 agents": ("trace", trace_of_4000_agents),
}


async def judged_while_polled(port: int, path: str, body: bytes) -> tuple[int, float, float, int]:
    """(status of the large request, its seconds, worst healthcheck ms, checks made)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    head = (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAPI-Key: {KEY}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode()
    hreader, hwriter = await asyncio.open_connection("127.0.0.1", port)
    check = b"GET /api/healthcheck HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    hwriter.write(check)
    await read_response(hreader)  # the connection is open and warm

    started = time.perf_counter()
    writer.write(head + body)
    big = asyncio.ensure_future(read_response(reader))
    worst = 0.0
    checks = 0
    while not big.done():
        t0 = time.perf_counter()
        hwriter.write(check)
        await read_response(hreader)
        worst = max(worst, time.perf_counter() - t0)
        checks += 1
        await asyncio.sleep(0.01)
    status = await big
    elapsed = time.perf_counter() - started
    writer.close()
    hwriter.close()
    return status, elapsed, worst * 1000, checks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    bodies = {name: (kind, make()) for name, (kind, make) in SHAPES.items()}
    print(f"local server, heuristic judge, {os.cpu_count()} CPU(s), goal: worst <= {GOAL_MS:g} ms")
    overall = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        srv = ServerProcess(
            api_keys=(KEY,),
            dev_faults=False,
            db=Path(tmp) / "bench.sqlite3",
            extra_args=["--no-access-log"],
        )
        with srv:
            for name, (kind, body) in bodies.items():
                for n in range(args.rounds):
                    status, seconds, worst, checks = asyncio.run(
                        judged_while_polled(srv.port, f"/api/v1/evals/{kind}", body)
                    )
                    overall = max(overall, worst)
                    print(
                        f"{kind} {name:18s} {len(body) / 2**20:4.1f} MiB round {n + 1}: "
                        f"status {status}, "
                        f"judged in {seconds:5.2f}s; worst healthcheck {worst:6.1f} ms "
                        f"({checks} checks)  ratio to goal {worst / GOAL_MS:.2f}x"
                    )
    print(f"worst of all: {overall:.1f} ms  ratio to goal {overall / GOAL_MS:.2f}x (goal <= 1.00x)")


if __name__ == "__main__":
    main()
