"""``timeout`` as a real deadline, measured in one run: a server on loopback sends its answer one
byte every 0.1 s (in the status line, the headers or the body, so a whole answer would take over a
minute), and each client's call with ``timeout=2`` must raise ``APITimeoutError`` within 3.5 s.
The figure is the elapsed time against that limit (goal: <= 1.0). One call is answered first, as
in a process that has evaluated before (a cold first call also builds its models and loads the
plugins, before its clock starts).

    python benchmarks/bench_deadline.py [--timeout 2]
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from composo import APITimeoutError, AsyncComposo, Composo
from tests.support.loopback import Loopback, Seen, answer, drip

QA = [
    {"role": "user", "content": "What's the capital of France?"},
    {"role": "assistant", "content": "The capital of France is Paris."},
]
BODY = b'{"score": 0.9, "explanation": "' + b"x" * 600 + b'"}'
HEAD = f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(BODY)}\r\n\r\n"


def dripping(where: str) -> Loopback:
    def handler(sock: socket.socket, seen: Seen) -> None:
        if where == "body":
            sock.sendall(HEAD.encode())
            drip(sock, BODY, 0.1, server.stop)
        else:
            drip(sock, HEAD.encode() + BODY, 0.1, server.stop)

    server = Loopback(handler)
    return server


def sync_call(url: str, timeout: float) -> float:
    with Composo(api_key="k", base_url=url, timeout=timeout) as c:
        start = time.monotonic()
        try:
            c.evaluate(messages=QA, criteria="Reward accurate answers")
        except APITimeoutError:
            return time.monotonic() - start
    raise AssertionError("the call did not time out")


async def async_call(url: str, timeout: float) -> float:
    async with AsyncComposo(api_key="k", base_url=url, timeout=timeout) as c:
        start = time.monotonic()
        try:
            await c.evaluate(messages=QA, criteria="Reward accurate answers")
        except APITimeoutError:
            return time.monotonic() - start
    raise AssertionError("the call did not time out")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--timeout", type=float, default=2.0)
    args = parser.parse_args()
    verdict = {"score": 1.0, "explanation": "ok"}
    with (
        Loopback(lambda sock, seen: answer(sock, verdict)) as srv,
        Composo(api_key="k", base_url=srv.url) as warm,
    ):
        warm.evaluate(messages=QA, criteria="Reward accurate answers")
    limit = args.timeout + 1.5
    for where in ("head", "body"):
        for kind in ("sync", "async"):
            with dripping(where) as srv:
                if kind == "sync":
                    took = sync_call(srv.url, args.timeout)
                else:
                    took = asyncio.run(async_call(srv.url, args.timeout))
            print(
                f"{kind:5} client, answer's {where} dripped: timeout={args.timeout:g} raised after "
                f"{took:.2f} s -> {took / limit:.2f} of the {limit:g} s limit (goal <= 1.0)"
            )
