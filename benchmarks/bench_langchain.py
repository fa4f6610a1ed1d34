"""ComposoCallback never slows a LangChain chain, and its memory stays flat, as figures measured
in one run against the local server answering with 500 ms latency.

1. Chain wall time with the callback / without it (goal <= 1.05x: evaluation never blocks).
   The chain is prompt | chat model | parser, the model taking 20 ms like a fast provider call.
   Also printed: the callback's cost per run with an instant model (the worst case, in µs).
   And the handler's own cost per LangChain event, its methods called directly (microseconds).
2. Memory held after 10,000 evaluated runs / after 100 (goal: flat, 1.0x): Python memory blocks
   and process RSS, each measured after flush() (runs are sent 100 at a time, flushing in
   between, so the backlog peaks at the same size in both; this part takes a few minutes).

Run: python benchmarks/bench_langchain.py [--runs 10000]
"""

from __future__ import annotations

import argparse
import gc
import logging
import os
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from langchain_composo import ComposoCallback
from langchain_core.callbacks import BaseCallbackHandler, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.output_parsers import StrOutputParser
from langchain_core.outputs import ChatGeneration, ChatResult, LLMResult
from langchain_core.prompts import ChatPromptTemplate

from composo import AsyncComposo
from composo.server import LocalServer

CRITERION = "Reward answers that address the user's question"


class QuickModel(BaseChatModel):
    """Echoes the question after ``delay`` seconds (a stand-in for a provider call)."""

    delay: float = 0.0

    @property
    def _llm_type(self) -> str:
        return "quick"

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        if self.delay:
            time.sleep(self.delay)
        answer = AIMessage(f"You asked: {messages[-1].content}")
        return ChatResult(generations=[ChatGeneration(message=answer)])


def chain(delay: float) -> Any:
    prompt = ChatPromptTemplate.from_messages([("system", "Be brief."), ("human", "{q}")])
    return prompt | QuickModel(delay=delay) | StrOutputParser()


class NoopHandler(BaseCallbackHandler):
    """What LangChain itself costs for any callback handler, as a reference."""

    run_inline = True


def timed(runnable: Any, n: int, config: Any) -> float:
    start = time.perf_counter()
    for i in range(n):
        runnable.invoke({"q": f"question {i}?"}, config=config)
    return time.perf_counter() - start


def bench_wall_time(srv: LocalServer) -> None:
    client = AsyncComposo(api_key=srv.api_key, base_url=srv.base_url)
    callback = ComposoCallback(criteria=CRITERION, client=client, max_pending=100_000)
    configs = {
        "without": None,
        "no-op handler": {"callbacks": [NoopHandler()]},
        "ComposoCallback": {"callbacks": [callback]},
    }
    for label, delay, n, rounds in (("20 ms model", 0.02, 10, 8), ("instant model", 0.0, 100, 15)):
        runnable = chain(delay)
        times: dict[str, list[float]] = {k: [] for k in configs}
        for _ in range(rounds):  # interleaved, so drift and background work affect all alike
            for key, config in configs.items():
                times[key].append(timed(runnable, n, config) / n)
        per_run = {k: statistics.median(v) for k, v in times.items()}
        base, noop, ours = (per_run[k] for k in configs)
        print(
            f"  {label:13s}: without {base * 1e3:6.2f} ms/run, with ComposoCallback "
            f"{ours * 1e3:6.2f} ms/run -> ratio {ours / base:.3f}x; callback cost "
            f"{(ours - base) * 1e6:+.0f} µs/run (a no-op LangChain handler: "
            f"{(noop - base) * 1e6:+.0f} µs/run)"
        )
    print(f"  ({callback.pending:,} evaluations were still pending on the 500 ms server)")
    callback.close(timeout=0)


def bench_bookkeeping(srv: LocalServer, n: int = 5000) -> None:
    """The handler's own cost, its event methods called directly (no LangChain around them)."""
    messages = [SystemMessage("Be brief."), HumanMessage("What is the capital of France?")]
    answer = LLMResult(generations=[[ChatGeneration(message=AIMessage("Paris."))]])
    for mode in ("llm", "trace"):
        client = AsyncComposo(api_key=srv.api_key, base_url=srv.base_url)
        callback = ComposoCallback(criteria=CRITERION, client=client, mode=mode, max_pending=n + 1)
        ids = [(uuid.uuid4(), uuid.uuid4(), uuid.uuid4()) for _ in range(n)]
        events = 0
        start = time.perf_counter()
        for root, node, call in ids:
            callback.on_chain_start({}, {}, run_id=root, name="agent")
            callback.on_chain_start({}, {}, run_id=node, parent_run_id=root, tags=["graph:step:1"])
            callback.on_chat_model_start({}, [messages], run_id=call, parent_run_id=node)
            callback.on_llm_end(answer, run_id=call, parent_run_id=node)
            callback.on_chain_end({}, run_id=node, parent_run_id=root)
            callback.on_chain_end({}, run_id=root)
            events += 6
        per_event = (time.perf_counter() - start) / events
        print(
            f"  mode={mode!r:8s}: {per_event * 1e6:5.1f} µs per LangChain event, run maps "
            f"afterwards: {callback.open_runs} open runs ({callback.pending:,} evaluations queued)"
        )
        callback.close(timeout=0)  # the queued evaluations are not the point here


def held(callback: ComposoCallback, runnable: Any, runs: int, chunk: int) -> tuple[int, int]:
    """Run ``runs`` evaluated runs, ``chunk`` at a time, each chunk flushed, so the backlog
    peaks at the same size however many runs there are. Returns (blocks, RSS bytes) held."""
    for start in range(0, runs, chunk):
        for i in range(start, min(start + chunk, runs)):
            runnable.invoke({"q": f"question {i}?"}, config={"callbacks": [callback]})
        if not callback.flush(timeout=600):
            raise RuntimeError("evaluations did not finish")
    gc.collect()
    return sys.getallocatedblocks(), _rss()


def _rss() -> int:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return 0


def bench_memory(srv: LocalServer, runs: int, first: int = 100, chunk: int = 100) -> None:
    # Enough requests in flight that 10,000 evaluations at 500 ms each do not take hours.
    client = AsyncComposo(api_key=srv.api_key, base_url=srv.base_url, max_concurrent_requests=chunk)
    callback = ComposoCallback(criteria=CRITERION, client=client, max_results=100)
    runnable = chain(0.0)
    held(callback, runnable, chunk, chunk)  # warm-up: imports, caches, connection pool
    started = time.perf_counter()
    small_blocks, small_rss = held(callback, runnable, first, first)
    large_blocks, large_rss = held(callback, runnable, runs - first, chunk)
    seconds = time.perf_counter() - started
    stats = callback.stats
    print(
        f"  Python memory blocks held: {small_blocks:,} after {first} runs, {large_blocks:,} after "
        f"{runs:,} -> ratio {large_blocks / small_blocks:.3f}x "
        f"({(large_blocks - small_blocks) / (runs - first):+.2f} blocks/run)"
    )
    print(
        f"  process RSS: {small_rss / 2**20:.1f} MiB after {first} runs, "
        f"{large_rss / 2**20:.1f} MiB after {runs:,} -> ratio {large_rss / max(small_rss, 1):.3f}x"
    )
    print(
        f"  {stats['completed']:,} evaluations completed, {stats['failed']} failed; open runs "
        f"{callback.open_runs}; results kept {len(callback.results)} (max_results=100); "
        f"{seconds:.0f}s"
    )
    callback.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10_000)
    args = parser.parse_args()
    # Part 1 abandons its queued evaluations on purpose; only errors are worth showing.
    logging.getLogger("composo").setLevel(logging.ERROR)
    with LocalServer(latency=0.5) as srv:
        print("1. chain wall time, with ComposoCallback / without (goal <= 1.05x)")
        bench_wall_time(srv)
        print("   the callback's own bookkeeping (goal: microseconds)")
        bench_bookkeeping(srv)
        print(f"2. memory after {args.runs:,} evaluated runs / after 100 (goal: flat)")
        bench_memory(srv, args.runs)


if __name__ == "__main__":
    main()
