"""Agent spans of an instrumentor, seen live by ``AgentTracer``: spans made with the real
OpenTelemetry SDK and labelled the OpenInference way open sub-agents of the tracer's agent where
they start, nest, and give the same trace as the OTLP file exported from the same run. Spans may
end in any order, agents may run in parallel threads and asyncio tasks."""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace as trace_api
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from composo import (
    AgentTracer,
    ComposoTracer,
    InputMessage,
    LLMInteraction,
    MultiAgentTrace,
    OutputMessage,
    trace_from_otlp,
)
from composo.ext import record_interaction
from tests.support.otlp_files import OtlpJsonFileExporter
from tests.test_tracing_agents import contents

KIND = "openinference.span.kind"


@pytest.fixture
def export(tmp_path: Path) -> Iterator[Path]:
    """Spans go to an OTLP/JSON file, ``AgentTracer`` exporting its own agent spans too."""
    path = tmp_path / "spans.jsonl"
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(OtlpJsonFileExporter(path)))
    ComposoTracer.init(tracer_provider=provider, agent_spans=True)
    yield path
    ComposoTracer.shutdown()
    provider.shutdown()


def framework() -> trace_api.Tracer:
    return ComposoTracer.tracer_provider().get_tracer("framework")


def llm_attributes(prompt: str, answer: str) -> dict[str, str]:
    return {
        KIND: "LLM",
        "llm.input_messages.0.message.role": "user",
        "llm.input_messages.0.message.content": prompt,
        "llm.output_messages.0.message.role": "assistant",
        "llm.output_messages.0.message.content": answer,
    }


def llm(prompt: str, answer: str = "ok") -> None:
    with framework().start_as_current_span("llm", attributes=llm_attributes(prompt, answer)):
        pass


def agent(name: str) -> AbstractContextManager[Any]:
    """An agent span the way agent frameworks' instrumentors make one."""
    return framework().start_as_current_span(name, attributes={KIND: "AGENT", "agent.name": name})


def sub_agents(trace: MultiAgentTrace, agent_id: str) -> dict[str, str]:
    """The sub-agents an agent references: name -> id."""
    return {
        trace.agent_instance_by_id[step].name: step
        for step in trace.agent_instance_by_id[agent_id].interactions
        if isinstance(step, str)
    }


def test_agent_spans_nest_live_as_in_the_exported_file(export: Path) -> None:
    with AgentTracer("app", agent_id="app-1") as tracer:
        llm("before")
        with agent("planner"):
            llm("plan")
            with agent("researcher"):
                llm("research")
            llm("plan again")
        llm("after")
    live = tracer.trace

    assert live.root_agent_instance_id == "app-1"
    assert contents(live, "app-1") == ["before", "<planner>", "after"]
    planner = sub_agents(live, "app-1")["planner"]
    assert contents(live, planner) == ["plan", "<researcher>", "plan again"]
    assert contents(live, sub_agents(live, planner)["researcher"]) == ["research"]
    assert trace_from_otlp(export) == live


def test_spans_ending_after_their_agent_span_are_kept(export: Path) -> None:
    tracer_ = framework()
    with AgentTracer("app", agent_id="app-1") as tracer:
        quick = tracer_.start_span("quick", attributes={KIND: "AGENT"})  # named after the span
        inside_quick = trace_api.set_span_in_context(quick)
        inner = tracer_.start_span(
            "inner", context=inside_quick, attributes={KIND: "AGENT", "agent.name": "inner"}
        )
        late = tracer_.start_span(
            "llm",
            context=trace_api.set_span_in_context(inner),
            attributes=llm_attributes("late", "still here"),
        )
        quick.end()  # the outer agent ends first, its sub-agent and call still running
        with agent("slow"):
            llm("slow call")  # the usual order: the agent span ends after its calls
        inner.end()
    late.end()  # after its agent span and after the tracer's block
    live = tracer.trace

    assert contents(live, "app-1") == ["<quick>", "<slow>"]
    quick_id = sub_agents(live, "app-1")["quick"]
    assert contents(live, quick_id) == ["<inner>"]
    [call] = live.agent_instance_by_id[sub_agents(live, quick_id)["inner"]].interactions
    assert isinstance(call, LLMInteraction) and call.output_messages[0].content == "still here"
    assert contents(live, sub_agents(live, "app-1")["slow"]) == ["slow call"]
    assert trace_from_otlp(export) == live


def test_agents_in_parallel_threads_keep_their_own_calls(export: Path) -> None:
    both = threading.Barrier(2, timeout=10)

    def work(name: str) -> None:
        with agent(name):
            both.wait()  # the two agent spans are open at once
            llm(f"{name} 1")
            both.wait()
            llm(f"{name} 2")

    with AgentTracer("app", agent_id="app-1") as tracer:
        threads = [
            threading.Thread(target=contextvars.copy_context().run, args=(work, name))
            for name in ("north", "south")
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    live = tracer.trace

    found = sub_agents(live, "app-1")
    assert sorted(found) == ["north", "south"]
    for name, agent_id in found.items():
        assert contents(live, agent_id) == [f"{name} 1", f"{name} 2"]
    from_file = trace_from_otlp(export)
    assert from_file.agent_instance_by_id.keys() == live.agent_instance_by_id.keys()
    for agent_id in found.values():
        assert from_file.agent_instance_by_id[agent_id] == live.agent_instance_by_id[agent_id]


def test_agents_in_concurrent_asyncio_tasks_keep_their_own_calls(export: Path) -> None:
    async def work(name: str) -> None:
        with agent(name):
            await asyncio.sleep(0)  # the other task's agent opens in between
            llm(f"{name} 1")
            await asyncio.sleep(0)
            llm(f"{name} 2")

    async def run() -> None:
        await asyncio.gather(*(work(name) for name in ("east", "west", "up")))

    with AgentTracer("app", agent_id="app-1") as tracer:
        asyncio.run(run())
    live = tracer.trace

    found = sub_agents(live, "app-1")
    assert contents(live, "app-1") == ["<east>", "<west>", "<up>"]  # in the order they started
    for name, agent_id in found.items():
        assert contents(live, agent_id) == [f"{name} 1", f"{name} 2"]
    assert trace_from_otlp(export) == live


def test_a_tool_span_with_model_calls_inside_is_a_sub_agent_named_after_it(
    export: Path,
) -> None:
    def tool(name: str) -> AbstractContextManager[Any]:
        return framework().start_as_current_span(
            f"run {name}", attributes={KIND: "TOOL", "tool.name": name}
        )

    with AgentTracer("app", agent_id="app-1") as tracer:
        llm("which tools?")
        with tool("clock"):
            pass  # no model call: not an agent
        with (
            tool("summarise"),
            framework().start_as_current_span("step", attributes={KIND: "CHAIN"}),
        ):
            llm("summarise the page")
            llm("shorter")
        llm("answer")
    live = tracer.trace

    assert contents(live, "app-1") == ["which tools?", "<summarise>", "answer"]
    summarise = sub_agents(live, "app-1")["summarise"]
    assert contents(live, summarise) == ["summarise the page", "shorter"]
    assert trace_from_otlp(export) == live


def test_tracers_and_records_inside_an_agent_span_belong_to_its_agent(export: Path) -> None:
    def recorded(prompt: str, answer: str) -> LLMInteraction:
        return LLMInteraction(
            input_messages=[InputMessage(role="user", type="text", content=prompt)],
            output_messages=[OutputMessage(type="text", content=answer)],
        )

    with AgentTracer("app", agent_id="app-1") as tracer:
        with agent("planner"):
            record_interaction(recorded("recorded", "by a feed"))
            # one call seen by a span and recorded by another feed: the record wins, once
            llm("twice", "same answer")
            record_interaction(recorded("twice", "same answer"))
            with AgentTracer("writer", agent_id="writer-1"):
                llm("write")
            with framework().start_as_current_span("chat", attributes=llm_attributes("outer", "x")):
                llm("wrapped by the outer call")  # a model call inside another: counted once
        llm("done")
    live = tracer.trace

    assert contents(live, "app-1") == ["<planner>", "done"]
    planner = sub_agents(live, "app-1")["planner"]
    assert contents(live, planner) == ["recorded", "twice", "<writer>", "outer"]
    assert contents(live, "writer-1") == ["write"]
    assert live.llm_interaction_count() == 5


def test_agent_spans_leave_nothing_behind(export: Path) -> None:
    from composo.tracing._tracer import _processors

    processor = _processors[ComposoTracer.tracer_provider()]
    with agent("outside"):  # no tracer: nothing is remembered
        llm("ignored")
        assert processor.pending() == 0
    with AgentTracer("app") as tracer:
        with agent("planner"):
            for n in range(50):
                with framework().start_as_current_span("step", attributes={KIND: "CHAIN"}):
                    llm(f"q{n}")
            assert processor.pending() == 1  # the agent span itself, while it runs
        assert processor.pending() == 0
    assert tracer._spans == {}
    assert tracer.trace.llm_interaction_count() == 50
