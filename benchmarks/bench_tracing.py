"""Added cost of tracing per LLM call, as ratios measured in one run.

The real ``openai`` client calls the loopback OpenAI stand-in (Chat Completions with tools and a
tool-call answer, and the Responses API) in three modes, interleaved in rounds so that machine
noise hits all of them alike:

- plain:       not instrumented;
- instrumented: ``ComposoTracer.init()`` on, call made outside any ``AgentTracer`` (the cost of
               OpenTelemetry and the OpenInference instrumentor);
- traced:      inside an ``AgentTracer``, with ``tracer.trace`` read at the end and its cost
               spread over the calls (everything a user pays).

Printed: median wall ms per call per mode (noisy on a shared machine), median CPU ms the calling
thread spent per call (what tracing adds runs in that thread; the stand-in runs in another), and
the added CPU ms per call (traced - plain) as a ratio of the goal of 1 ms (goal: <= 1.0x).

Run: python benchmarks/bench_tracing.py
"""

from __future__ import annotations

import multiprocessing
import statistics
import sys
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import openai

from composo import AgentTracer, ComposoTracer, Instruments
from tests.support.openai_standin import (
    OpenAIStandIn,
    chat_completion,
    function_call,
    output_message,
    response,
    tool_call,
)

GOAL_MS = 1.0
BATCH = 10  # calls per mode before switching to the next mode
CYCLES = 40

TOOLS: list[Any] = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather for a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
]
CHAT: list[Any] = [
    {"role": "system", "content": "You are a travel assistant. Be concise."},
    {"role": "user", "content": "I am flying to Lisbon tomorrow. What should I pack?"},
    {"role": "assistant", "content": "Let me check the weather first."},
    {"role": "user", "content": "Please do, and also suggest a restaurant."},
]


def chat_call(client: openai.OpenAI) -> None:
    client.chat.completions.create(model="gpt-4o-mini", messages=CHAT, tools=TOOLS)


def responses_call(client: openai.OpenAI) -> None:
    client.responses.create(model="gpt-4.1", instructions="Be concise.", input=CHAT[1]["content"])


def timed(call: Callable[[], None], n: int) -> list[tuple[float, float]]:
    """(wall, caller-thread CPU) seconds per call."""
    out = []
    for _ in range(n):
        wall, cpu = time.perf_counter(), time.thread_time()
        call()
        out.append((time.perf_counter() - wall, time.thread_time() - cpu))
    return out


def run_mode(mode: str, call: Callable[[], None]) -> list[tuple[float, float]]:
    if mode == "plain":
        ComposoTracer.shutdown()
        return timed(call, BATCH)
    ComposoTracer.init(instruments=Instruments.OPENAI)
    if mode == "instrumented":
        return timed(call, BATCH)
    with AgentTracer(name="bench") as tracer:
        per_call = timed(call, BATCH)
    wall, cpu = time.perf_counter(), time.thread_time()
    if tracer.trace.llm_interaction_count() != BATCH:
        raise RuntimeError("the traced calls were not all captured")
    wall, cpu = time.perf_counter() - wall, time.thread_time() - cpu
    return [(w + wall / BATCH, c + cpu / BATCH) for w, c in per_call]


def bench(label: str, call: Callable[[], None]) -> None:
    modes = ("plain", "instrumented", "traced")
    samples: dict[str, list[tuple[float, float]]] = {mode: [] for mode in modes}
    timed(call, 30)  # warm up connections and caches
    for _ in range(CYCLES):
        for mode in modes:
            samples[mode] += run_mode(mode, call)
    ComposoTracer.shutdown()
    wall = {m: statistics.median(w for w, _ in s) * 1000 for m, s in samples.items()}
    cpu = {m: statistics.median(c for _, c in s) * 1000 for m, s in samples.items()}
    added = cpu["traced"] - cpu["plain"]
    print(f"{label}:")
    print(
        "  wall ms per call (median): "
        + ", ".join(f"{m} {wall[m]:.3f}" for m in modes)
        + f"; added {wall['traced'] - wall['plain']:+.3f}"
    )
    print("  caller CPU ms per call (median): " + ", ".join(f"{m} {cpu[m]:.3f}" for m in modes))
    print(
        f"  added by tracing: {added:.3f} ms per call = {added / GOAL_MS:.2f}x the {GOAL_MS:g} ms "
        f"goal (OpenTelemetry + OpenInference: {cpu['instrumented'] - cpu['plain']:.3f} ms)"
    )


def chat_answer(body: Any) -> Any:
    return chat_completion(
        content="Checking the forecast.", tool_calls=[tool_call("get_weather", {"city": "Lisbon"})]
    )


def response_answer(body: Any) -> Any:
    return response(
        [
            function_call("get_weather", {"city": "Lisbon"}),
            output_message("Pack light layers and a raincoat."),
        ]
    )


def serve(conn: Connection) -> None:
    """The stand-in in its own process, as OpenAI is: it does not compete with the client."""
    with OpenAIStandIn() as oa:
        oa.on_chat(chat_answer)
        oa.on_response(response_answer)
        conn.send(oa.base_url)
        conn.recv()


def main() -> None:
    ours, theirs = multiprocessing.Pipe()
    server = multiprocessing.get_context("spawn").Process(target=serve, args=(theirs,))
    server.start()
    try:
        base_url = ours.recv()
        with openai.OpenAI(base_url=base_url, api_key="sk-bench") as client:
            print(f"{BATCH * CYCLES} calls per mode, interleaved, loopback OpenAI stand-in")
            bench(
                "Chat Completions (4 messages, 1 tool, tool-call answer)", lambda: chat_call(client)
            )
            bench("Responses API (function call + text)", lambda: responses_call(client))
    finally:
        ours.send("stop")
        server.join(10)


if __name__ == "__main__":
    main()
