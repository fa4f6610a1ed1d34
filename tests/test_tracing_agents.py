"""``AgentTracer`` and ``agent_tracer`` on their own: decorators, ordering, bad input, calls fed
by integrations, and bounded memory over thousands of runs."""

from __future__ import annotations

import gc
import sys
import weakref
from collections.abc import Iterator
from typing import Any

import pytest

from composo import (
    AgentTracer,
    ComposoTracer,
    ComposoValidationError,
    InputMessage,
    LLMInteraction,
    MultiAgentTrace,
    OutputMessage,
    agent_tracer,
)
from composo.tracing import current_tracer, record_interaction
from tests.support.lazy import lazy_import
from tests.support.openai_standin import OpenAIStandIn, chat_completion

openai = lazy_import("openai")


@pytest.fixture
def tracing() -> Iterator[None]:
    ComposoTracer.init()
    yield
    ComposoTracer.shutdown()


def llm_span(prompt: str, answer: str) -> None:
    """One model call as any OpenInference instrumentor reports it (a real OpenTelemetry span)."""
    tracer = ComposoTracer.tracer_provider().get_tracer("framework")
    attributes = {
        "openinference.span.kind": "LLM",
        "llm.input_messages.0.message.role": "user",
        "llm.input_messages.0.message.content": prompt,
        "llm.output_messages.0.message.role": "assistant",
        "llm.output_messages.0.message.content": answer,
    }
    with tracer.start_as_current_span("llm", attributes=attributes):
        pass


def live_blocks() -> int:
    """The interpreter's allocated memory blocks after a full collection: exact and cheap (no
    allocation tracing), so a leak of one small object per run shows as one block per run."""
    gc.collect()
    return sys.getallocatedblocks()


def framework_step(name: str, kind: str = "CHAIN") -> None:
    """A span whose kind is only set as it ends (OpenInference's LangChain tracer does this)."""
    tracer = ComposoTracer.tracer_provider().get_tracer("framework")
    with tracer.start_as_current_span(name) as span:
        span.set_attribute("openinference.span.kind", kind)


def interaction(prompt: str, answer: str) -> LLMInteraction:
    return LLMInteraction(
        input_messages=[InputMessage(role="user", type="text", content=prompt)],
        output_messages=[OutputMessage(type="text", content=answer)],
    )


def contents(trace: MultiAgentTrace, agent_id: str) -> list[str]:
    out = []
    for step in trace.agent_instance_by_id[agent_id].interactions:
        if isinstance(step, LLMInteraction):
            out.append(str(step.input_messages[0].content))
        else:
            out.append(f"<{trace.agent_instance_by_id[step].name}>")
    return out


def test_decorated_sync_and_async_agents(tracing: None) -> None:
    received: list[MultiAgentTrace] = []

    @agent_tracer(name="researcher", on_trace=received.append)
    def research(topic: str) -> str:
        llm_span(topic, "notes")
        return "notes"

    @agent_tracer
    async def summarise(text: str) -> str:
        llm_span(text, "summary")
        return "summary"

    import asyncio

    with AgentTracer(name="orchestrator") as tracer:
        llm_span("plan", "ok")
        assert research("cells") == "notes"
        assert asyncio.run(summarise("notes")) == "summary"
    assert research.__name__ == "research"
    assert contents(tracer.trace, tracer.agent_id) == ["plan", "<researcher>", "<summarise>"]
    (own,) = received
    assert [a.name for a in own.agent_instance_by_id.values()] == ["researcher"]


def test_decorator_takes_the_platform_sdks_agent_id(tracing: None) -> None:
    @agent_tracer("researcher", "researcher-1")  # agent_tracer(name, agent_id) as there
    def research(topic: str) -> str:
        llm_span(topic, "notes")
        return "notes"

    with AgentTracer(name="orchestrator") as tracer:
        research("cells")
    assert contents(tracer.trace, "researcher-1") == ["cells"]
    with pytest.raises(ComposoValidationError, match="agent_id: expected a non-empty string"):
        agent_tracer(name="researcher", agent_id="")


def test_record_interaction_feeds_the_innermost_agent() -> None:
    assert record_interaction(interaction("nobody", "listening")) is False
    with AgentTracer(name="outer") as outer:
        assert current_tracer() is outer
        record_interaction(interaction("first", "1"))
        with AgentTracer(name="inner") as inner:
            assert record_interaction(interaction("nested", "2")) is True
        record_interaction(interaction("last", "3"))
    assert current_tracer() is None
    trace = outer.trace
    assert contents(trace, outer.agent_id) == ["first", "<inner>", "last"]
    assert contents(trace, inner.agent_id) == ["nested"]
    assert contents(inner.trace, inner.agent_id) == ["nested"]  # a sub-agent's own trace


def test_bad_arguments_and_reuse_are_refused() -> None:
    with pytest.raises(ComposoValidationError, match="name: expected a non-empty string"):
        AgentTracer(name="")
    with pytest.raises(ComposoValidationError, match="agent_id"):
        AgentTracer(agent_id=42)  # type: ignore[arg-type]
    with AgentTracer(agent_id="same") as outer:
        record_interaction(interaction("a", "b"))
        with AgentTracer(agent_id="same"):
            record_interaction(interaction("c", "d"))
    with pytest.raises(ComposoValidationError, match="'same' is used by two AgentTracers"):
        _ = outer.trace
    with pytest.raises(RuntimeError, match="already run"), outer:
        pass


def test_trace_read_inside_the_block_has_the_calls_so_far() -> None:
    with AgentTracer() as tracer:
        record_interaction(interaction("one", "1"))
        assert tracer.trace.llm_interaction_count() == 1
        record_interaction(interaction("two", "2"))
    assert tracer.trace.llm_interaction_count() == 2


@pytest.mark.slow
def test_thousands_of_runs_leave_nothing_behind(tracing: None) -> None:
    from composo.tracing._tracer import _processors

    processor = _processors[ComposoTracer.tracer_provider()]

    def run(n: int) -> Any:
        with AgentTracer(name="worker") as tracer:
            llm_span(f"q{n}", "a")
            framework_step("parse")
            with AgentTracer(name="helper"):
                llm_span("sub", "b")
                framework_step("tool", "TOOL")
        assert tracer.trace.llm_interaction_count() == 2
        return weakref.ref(tracer)

    for n in range(200):  # warm up caches (pydantic, OpenTelemetry)
        run(n)
    before = live_blocks()
    refs = [run(n) for n in range(3000)]
    grown = live_blocks() - before - len(refs)  # the list of weak references is ours
    # one object kept per run would be 3,000 blocks; what is left is the allocator's noise
    assert grown < 300, f"{grown} memory blocks retained after 3000 runs"
    assert all(r() is None for r in refs)
    assert processor.pending() == 0


def test_long_agent_keeps_nothing_for_spans_that_are_not_model_calls(tracing: None) -> None:
    with AgentTracer(name="long") as tracer:
        llm_span("start", "a")
        for _ in range(200):  # warm up
            framework_step("step")
        before = live_blocks()
        for _ in range(3000):
            framework_step("step")
        grown = live_blocks() - before
        llm_span("end", "b")
    assert grown < 300, f"{grown} memory blocks kept for 3000 finished non-model spans"
    assert contents(tracer.trace, tracer.agent_id) == ["start", "end"]


def test_abandoned_stream_is_forgotten_with_its_agent(
    tracing: None, openai_standin: OpenAIStandIn
) -> None:
    from composo.tracing._tracer import _processors

    processor = _processors[ComposoTracer.tracer_provider()]
    openai_standin.queue_chat(chat_completion(content="never read"))
    client = openai.OpenAI(base_url=openai_standin.base_url, api_key="sk-test")
    with AgentTracer() as tracer:
        stream = client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}], stream=True
        )
    assert processor.pending() == 1  # the call is still running
    with pytest.raises(ComposoValidationError, match="captured no LLM call"):
        _ = tracer.trace
    del tracer
    gc.collect()
    assert processor.pending() == 0
    stream.close()
    client.close()
