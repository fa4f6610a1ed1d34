"""Core client speed, as ratios measured in one run.

1. ``import composo`` time / ``import httpx, pydantic`` time (goal <= 1.3x), and which heavy
   modules the import pulled in (goal: none).
2. Wall time of 5 criteria / wall time of 1, against the local server with 300 ms latency
   (goal <= 1.3x: criteria run concurrently).
3. Client CPU per request / a bare httpx POST of the same JSON, both on ``httpx.MockTransport``
   (goal <= 2x).

Run: python benchmarks/bench_core.py
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from composo import Composo
from tests.support.servers import ServerProcess

QA = [
    {"role": "user", "content": "What's the capital of France?"},
    {"role": "assistant", "content": "The capital of France is Paris."},
]
HEAVY = (
    "openai",
    "langchain",
    "langchain_core",
    "llama_index",
    "opentelemetry",
    "fastapi",
    "uvicorn",
)


def _import_seconds(stmt: str, runs: int = 15) -> float:
    code = f"import time; t = time.perf_counter(); {stmt}; print(time.perf_counter() - t)"
    times = [
        float(
            subprocess.run(
                [sys.executable, "-c", code], capture_output=True, text=True, check=True
            ).stdout
        )
        for _ in range(runs)
    ]
    return statistics.median(times)


def bench_import() -> None:
    base = _import_seconds("import httpx, pydantic")
    # `import pydantic` is lazy: defining any model loads its machinery, which is most of the
    # difference. This second baseline is what any pydantic-based library starts from.
    models = _import_seconds(
        "import httpx; from pydantic import BaseModel, ConfigDict, Field, model_validator"
    )
    ours = _import_seconds("import composo")
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
    print(
        f"import composo: {ours * 1000:.1f} ms vs import httpx, pydantic: {base * 1000:.1f} ms "
        f"-> ratio {ours / base:.2f}x (goal <= 1.3x); vs httpx + pydantic's model machinery "
        f"{models * 1000:.1f} ms -> ratio {ours / models:.2f}x; heavy modules imported: "
        f"{loaded or 'none'}"
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
            c.evaluate(messages=QA, criteria="Reward accurate answers")
            one.append(time.perf_counter() - t)
            t = time.perf_counter()
            c.evaluate(messages=QA, criteria=[f"Reward quality aspect {i}" for i in range(5)])
            five.append(time.perf_counter() - t)
    a, b = statistics.median(one), statistics.median(five)
    print(
        f"5 criteria at 300 ms latency: {b * 1000:.0f} ms vs 1 criterion {a * 1000:.0f} ms "
        f"-> ratio {b / a:.2f}x (goal <= 1.3x)"
    )


def bench_cpu(n: int = 3000) -> None:
    answer = json.dumps({"score": 0.9, "explanation": "Accurate and concise."}).encode()

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=answer, headers={"content-type": "application/json"})

    body = {"messages": QA, "evaluation_criteria": "Reward accurate answers"}
    url = "https://platform.composo.ai/api/v1/evals/reward"
    bare = httpx.Client(transport=httpx.MockTransport(handler))
    client = Composo(api_key="k", http_client=httpx.Client(transport=httpx.MockTransport(handler)))
    client.evaluate(messages=QA, criteria="Reward accurate answers")  # plugins load once

    def run_bare() -> None:
        bare.post(url, json=body, headers={"API-Key": "k"}).json()

    def run_ours() -> None:
        client.evaluate(messages=QA, criteria="Reward accurate answers")

    results = {}
    for name, fn in (("bare", run_bare), ("composo", run_ours)):
        samples = []
        for _ in range(3):
            t = time.process_time()
            for _ in range(n):
                fn()
            samples.append((time.process_time() - t) / n)
        results[name] = min(samples)
    ratio = results["composo"] / results["bare"]
    print(
        f"client CPU per request: {results['composo'] * 1e6:.0f} us vs bare httpx POST "
        f"{results['bare'] * 1e6:.0f} us -> ratio {ratio:.2f}x (goal <= 2x)"
    )


if __name__ == "__main__":
    bench_import()
    bench_cpu()
    bench_concurrency()
