"""The local server's memory under a burst of slow uploads, and after it.

1,000 authenticated clients (under the connection cap) each declare a 900 KiB reward body and
send it slowly, holding back its last byte, so every body is in flight at once. The server admits
bodies up to its in-flight budget (``--max-inflight-bytes``, 256 MiB by default) and answers the
rest 503 with ``Retry-After`` before reading them; an admitted body, once complete, is parsed and
refused (422: a JSON list, not a request), so what is measured is holding bodies, not judging
them. Printed: resident memory before, at the peak (against the budget plus a fixed overhead
for 1,000 connections) and after every connection closed (against 1.5x the baseline), and how
the uploads were answered.

The server runs as its own process (``python -m composo serve``); the clients are raw sockets on
127.0.0.1. About 20 s.

    python benchmarks/bench_server_memory.py [--clients 1000] [--budget-mib 256]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.bench_server import PeakRSS, rss_mib
from tests.support.servers import ServerProcess

KEY = "bench-key"
BODY_BYTES = 900 * 1024
PIECES = 12  # each body arrives in this many writes...
PAUSE = 0.15  # ...this many seconds apart
HOLD = 1.5  # seconds every admitted body is held one byte short of complete
OVERHEAD_MIB = 100.0  # what 1,000 connections and their buffers may add besides the bodies
AFTER_RATIO = 1.5


async def slow_upload(port: int, all_sent: asyncio.Event, release: asyncio.Event) -> str:
    """Send a 900 KiB body slowly, all but its last byte; wait for ``release``; what came back
    (a status, or how the connection ended)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(
        (
            f"POST /api/v1/evals/reward HTTP/1.1\r\nHost: 127.0.0.1\r\nAPI-Key: {KEY}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {BODY_BYTES}\r\n\r\n"
        ).encode()
    )
    body = b"[" + b" " * (BODY_BYTES - 2) + b"]"
    piece = len(body) // PIECES + 1
    answer = asyncio.ensure_future(reader.readline())
    try:
        for start in range(0, len(body) - 1, piece):
            if answer.done():
                break  # answered before the body was read: stop sending
            writer.write(body[start : min(start + piece, len(body) - 1)])
            await writer.drain()
            await asyncio.sleep(PAUSE)
        all_sent.set()
        await release.wait()
        if not answer.done():
            writer.write(body[-1:])
        line = await asyncio.wait_for(answer, 30)
        return line.split()[1].decode() if line else "closed"
    except (ConnectionError, asyncio.TimeoutError):
        return "closed"
    finally:
        answer.cancel()
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()


async def burst(port: int, clients: int, pid: int) -> tuple[dict[str, int], float]:
    """(answers by status, peak RSS in MiB while every body was in flight)."""
    release = asyncio.Event()
    sent = [asyncio.Event() for _ in range(clients)]
    tasks = []
    for event in sent:
        tasks.append(asyncio.ensure_future(slow_upload(port, event, release)))
        await asyncio.sleep(0.001)  # a second to open them all, as a burst of real clients would
    await asyncio.gather(*(e.wait() for e in sent))
    held = 0.0
    deadline = time.monotonic() + HOLD
    while time.monotonic() < deadline:
        held = max(held, rss_mib(pid))
        await asyncio.sleep(0.02)
    release.set()
    answers: dict[str, int] = {}
    for status in await asyncio.gather(*tasks):
        answers[status] = answers.get(status, 0) + 1
    return answers, held


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=1000)
    parser.add_argument("--budget-mib", type=int, default=256)
    args = parser.parse_args()
    budget = args.budget_mib * 1024 * 1024
    with tempfile.TemporaryDirectory() as tmp:
        srv = ServerProcess(
            api_keys=(KEY,),
            dev_faults=False,
            db=Path(tmp) / "bench.sqlite3",
            extra_args=[
                "--no-access-log",
                "--max-connections",
                str(args.clients + 100),
                "--max-inflight-bytes",
                str(budget),
            ],
        )
        with srv:
            assert srv.proc is not None
            pid = srv.proc.pid
            baseline = rss_mib(pid)
            with PeakRSS(pid) as peak:
                answers, held = asyncio.run(burst(srv.port, args.clients, pid))
            time.sleep(1.0)  # the server notices the closed connections
            after = rss_mib(pid)
    limit = baseline + args.budget_mib + OVERHEAD_MIB
    print(
        f"{args.clients} slow {BODY_BYTES // 1024} KiB uploads held at once, in-flight budget "
        f"{args.budget_mib} MiB: answers {dict(sorted(answers.items()))}"
    )
    print(
        f"server RSS: baseline {baseline:.0f} MiB, held {held:.0f} MiB, peak {peak.peak:.0f} MiB  "
        f"ratio to baseline + budget + {OVERHEAD_MIB:.0f} MiB overhead "
        f"({limit:.0f} MiB) {peak.peak / limit:.2f}x (goal <= 1.00x)"
    )
    print(
        f"server RSS after they closed: {after:.0f} MiB  ratio to baseline "
        f"{after / baseline:.2f}x (goal <= {AFTER_RATIO:.2f}x)"
    )


if __name__ == "__main__":
    main()
