"""Core client speed, as ratios measured in one run.

1. Import: ``import composo``, ``from composo import Composo`` and that import plus the first
   ``Composo(...)``, each against ``import httpx, pydantic`` in fresh interpreters, run in turn so
   that load from other work falls on all of them alike (goal for ``import composo``: <= 1.0x),
   and which optional modules the import pulled in (goal: none).
2. Client CPU per request: ``Composo.evaluate`` against a bare ``httpx.Client.post`` of the same
   JSON body, on ``httpx.MockTransport`` and against the local server in its own process
   (a guard: <= 1.5x). CPU time of this process only, so the server's work is not counted. Both
   the client's own ``httpx.Client`` and a supplied one send through ``httpx.Client.send``.
3. Wall time of 5 criteria / wall time of 1, against the local server with 300 ms latency
   (goal <= 1.3x: criteria run concurrently).
4. Wall time against latency, what users feel: with the server answering after 300 ms,
   ``evaluate_many`` of 100 items at concurrency 5 against the limit N x latency / 5 (goal >= 0.95
   of it), and ``AsyncComposo`` with 50 in flight against N x latency / 50 (goal >= 0.90).

On a shared machine the figures are noisy: each line gives the median over rounds and the range.

Run: python benchmarks/bench_core.py [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from composo import AsyncComposo, Composo
from composo._core.client import SyncClient
from tests.support.servers import ServerProcess

QA = [
    {"role": "user", "content": "What's the capital of France?"},
    {"role": "assistant", "content": "The capital of France is Paris."},
]
CRITERION = "Reward accurate answers"
BODY = {"messages": QA, "evaluation_criteria": CRITERION}
HEAVY = (
    "openai",
    "langchain",
    "langchain_core",
    "llama_index",
    "opentelemetry",
    "fastapi",
    "uvicorn",
)
IMPORTS = {
    "base": "import httpx, pydantic",
    "import composo": "import composo",
    "from composo import Composo": "from composo import Composo",
    "... + first Composo(...)": "from composo import Composo; Composo(api_key='k')",
}


def _import_seconds(stmt: str) -> tuple[float, float]:
    """Wall and CPU seconds of ``stmt`` in a fresh interpreter."""
    code = (
        "import time; w = time.perf_counter(); c = time.process_time(); "
        f"{stmt}; print(time.perf_counter() - w, time.process_time() - c)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()
    return float(out[0]), float(out[1])


def _spread(values: list[float], fmt: str = ".2f") -> str:
    return f"{statistics.median(values):{fmt}} (range {min(values):{fmt}}-{max(values):{fmt}})"


def bench_import(runs: int) -> None:
    wall: dict[str, list[float]] = {name: [] for name in IMPORTS}
    cpu: dict[str, list[float]] = {name: [] for name in IMPORTS}
    for _ in range(runs):
        for name, stmt in IMPORTS.items():
            w, c = _import_seconds(stmt)
            wall[name].append(w)
            cpu[name].append(c)
    heavy = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, composo; print(sorted({m.split('.')[0] for m in sys.modules}))",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    loaded = sorted(set(json.loads(heavy.replace("'", '"'))) & set(HEAVY))
    print(f"import ({runs} fresh interpreters each, in turn; ratios per round, then median):")
    base_ms = [w * 1000 for w in wall["base"]]
    print(f"  {IMPORTS['base']:32} {_spread(base_ms, '.1f')} ms")
    for name in list(IMPORTS)[1:]:
        ms = [w * 1000 for w in wall[name]]
        ratios = [a / b for a, b in zip(wall[name], wall["base"], strict=True)]
        cpu_ratios = [a / b for a, b in zip(cpu[name], cpu["base"], strict=True)]
        goal = " (goal <= 1.0x)" if name == "import composo" else ""
        print(
            f"  {name:32} {_spread(ms, '.1f')} ms -> ratio {_spread(ratios)}x{goal}; "
            f"CPU ratio {_spread(cpu_ratios)}x"
        )
    print(f"  optional modules imported by `import composo`: {loaded or 'none'}")


def _cpu_per_call(fn: Callable[[], object], n: int) -> float:
    t = time.process_time()
    for _ in range(n):
        fn()
    return (time.process_time() - t) / n


def _compare_cpu(label: str, bare: Callable[[], object], ours: Callable[[], object], n: int,
                 rounds: int) -> None:  # fmt: skip
    bare(), ours()  # warm: connections open, plugins and models loaded
    b_times, o_times = [], []
    for i in range(rounds):
        pair = ((bare, b_times), (ours, o_times))
        for fn, into in pair if i % 2 == 0 else reversed(pair):
            into.append(_cpu_per_call(fn, n))
    ratios = [o / b for o, b in zip(o_times, b_times, strict=True)]
    print(
        f"  {label:24} Composo {_spread([t * 1e6 for t in o_times], '.0f')} us vs bare httpx "
        f"POST {_spread([t * 1e6 for t in b_times], '.0f')} us -> ratio {_spread(ratios)}x "
        f"(best {min(o_times) / min(b_times):.2f}x; guard <= 1.5x)"
    )


def bench_cpu(n: int, rounds: int) -> None:
    print(f"client CPU per request ({rounds} rounds of {n} sequential requests each, in turn):")
    answer = json.dumps({"score": 0.9, "explanation": "Accurate and concise."}).encode()

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=answer, headers={"content-type": "application/json"})

    url = "https://platform.composo.ai/api/v1/evals/reward"

    with (
        httpx.Client(transport=httpx.MockTransport(handler)) as bare,
        # the core's client on its own httpx client, the mock as the transport handed to it
        SyncClient(api_key="k", transport=lambda: httpx.MockTransport(handler)) as own,
        Composo(
            api_key="k", http_client=httpx.Client(transport=httpx.MockTransport(handler))
        ) as supplied,
    ):
        _compare_cpu(
            "httpx.MockTransport",
            lambda: bare.post(url, json=BODY, headers={"API-Key": "k"}).json(),
            lambda: own.evaluate(messages=QA, criteria=CRITERION),
            n,
            rounds,
        )
        _compare_cpu(
            "  with http_client=",
            lambda: bare.post(url, json=BODY, headers={"API-Key": "k"}).json(),
            lambda: supplied.evaluate(messages=QA, criteria=CRITERION),
            n,
            rounds,
        )
    with (
        ServerProcess(dev_faults=False, extra_args=["--no-access-log"]) as srv,
        httpx.Client() as bare,
        Composo(api_key=srv.api_key, base_url=srv.base_url) as client,
    ):
        live_url = srv.base_url + "/api/v1/evals/reward"

        def live_bare() -> object:
            response = bare.post(live_url, json=BODY, headers={"API-Key": srv.api_key})
            response.raise_for_status()
            return response.json()

        _compare_cpu(
            "local server",
            live_bare,
            lambda: client.evaluate(messages=QA, criteria=CRITERION),
            max(n // 5, 100),
            rounds,
        )


def bench_concurrency() -> None:
    with (
        ServerProcess(latency=0.3, dev_faults=False) as srv,
        Composo(api_key=srv.api_key, base_url=srv.base_url) as c,
    ):
        c.evaluate(messages=QA, criteria="Reward warm-up")
        one, five = [], []
        for _ in range(5):
            t = time.perf_counter()
            c.evaluate(messages=QA, criteria=CRITERION)
            one.append(time.perf_counter() - t)
            t = time.perf_counter()
            c.evaluate(messages=QA, criteria=[f"Reward quality aspect {i}" for i in range(5)])
            five.append(time.perf_counter() - t)
    a, b = statistics.median(one), statistics.median(five)
    print(
        f"5 criteria at 300 ms latency: {b * 1000:.0f} ms vs 1 criterion {a * 1000:.0f} ms "
        f"-> ratio {b / a:.2f}x (goal <= 1.3x)"
    )


def bench_wall(quick: bool) -> None:
    latency = 0.3
    with ServerProcess(latency=latency, dev_faults=False, extra_args=["--no-access-log"]) as srv:
        with Composo(api_key=srv.api_key, base_url=srv.base_url) as c:
            c.evaluate(messages=QA, criteria="Reward warm-up")
            n = 100
            t = time.perf_counter()
            results = c.evaluate_many([{"messages": QA}] * n, CRITERION, concurrency=5)
            took = time.perf_counter() - t
            assert all(r.ok for r in results)
        limit = n * latency / 5
        print(
            f"evaluate_many, {n} items at concurrency 5, {latency * 1000:.0f} ms latency: "
            f"{took:.2f} s vs the limit {limit:.2f} s -> {limit / took:.3f} of it (goal >= 0.95)"
        )

        async def many(m: int) -> float:
            async with AsyncComposo(
                api_key=srv.api_key, base_url=srv.base_url, max_concurrent_requests=50
            ) as ac:
                await ac.evaluate(messages=QA, criteria="Reward warm-up")
                t = time.perf_counter()
                out = await ac.evaluate_many([{"messages": QA}] * m, CRITERION)
                assert all(r.ok for r in out)
                return time.perf_counter() - t

        m = 250 if quick else 1000
        took = asyncio.run(many(m))
        limit = m * latency / 50
        print(
            f"AsyncComposo, {m} items with 50 in flight, {latency * 1000:.0f} ms latency: "
            f"{took:.2f} s vs the limit {limit:.2f} s -> {limit / took:.3f} of it (goal >= 0.90)"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer runs, for a smoke test")
    args = parser.parse_args()
    bench_import(runs=5 if args.quick else 15)
    bench_cpu(n=500 if args.quick else 2000, rounds=3 if args.quick else 5)
    bench_concurrency()
    bench_wall(args.quick)
