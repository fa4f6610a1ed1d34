"""``TraceRecorder`` (from ``composo.ext``), used directly the way a framework integration uses
it: events in, a ``MultiAgentTrace`` out, evaluated by the local server."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import threading
import types
from typing import Any

import pytest

from composo import Composo, ComposoValidationError, LLMInteraction, MultiAgentTrace
from composo.ext import (
    Agent,
    Capture,
    TraceRecorder,
    lazy_exports,
    to_trace_inputs,
    to_trace_outputs,
    to_trace_tool,
)
from composo.types import InputMessage, OutputMessage, ToolCall, ToolResponse
from tests.support.servers import ServerProcess

CRITERION = "Reward agents that answer the question"


def call(question: str, answer: str) -> LLMInteraction:
    return LLMInteraction(
        input_messages=[InputMessage(role="user", type="text", content=question)],
        output_messages=[OutputMessage(type="text", content=answer)],
    )


def steps(trace: MultiAgentTrace, agent_id: str) -> list[str]:
    """An agent's history: answers for model calls, ``<name>`` for sub-agents."""
    agents = trace.agent_instance_by_id
    return [
        f"<{agents[s].name}>" if isinstance(s, str) else str(s.output_messages[0].content)
        for s in agents[agent_id].interactions
    ]


def test_events_become_a_trace_in_the_order_they_started(
    client: Composo, live: ServerProcess
) -> None:
    rec = TraceRecorder()
    root = rec.agent_started("root-1", "planner")
    slow = rec.reserve(root)  # a call that starts first and ends last
    rec.record(root, call("q1", "fast answer"))
    sub = rec.agent_started(None, "researcher", parent="root-1")
    rec.record(sub, call("q2", "found it"))
    rec.agent_finished(sub)
    slow.fill(call("q0", "slow answer"))
    gone = rec.reserve(root)
    gone.release()  # turned out not to be a model call
    rec.reserve(root)  # still running when the trace is read: not in it yet

    trace = rec.trace()
    assert trace.root_agent_instance_id == "root-1"
    assert list(trace.agent_instance_by_id) == ["root-1", sub.id]  # parents first
    assert steps(trace, "root-1") == ["slow answer", "fast answer", "<researcher>"]
    assert steps(trace, sub.id) == ["found it"]
    assert rec.interaction_count() == 3 and rec.open_agents == 1 and rec.agent_count == 2
    assert steps(rec.trace(sub), sub.id) == ["found it"]  # a sub-agent's own run

    result = client.evaluate_trace(trace=trace, criteria=CRITERION)
    assert set(result.results_by_agent_name) == {"planner", "researcher"}
    [body] = [r["body"] for r in live.requests() if r["path"].endswith("/evals/trace")]
    assert body["trace"] == trace.model_dump(mode="json", exclude_none=True)


def test_calls_handed_over_as_functions_are_converted_once_when_read() -> None:
    converted: list[str] = []

    def later(answer: str) -> Any:
        def convert() -> LLMInteraction:
            converted.append(answer)
            return call("q", answer)

        return convert

    rec = TraceRecorder()
    agent = rec.agent_started("a", "agent")
    rec.record(agent, later("one"))
    rec.record(agent, lambda: None)  # the framework's call left nothing to evaluate
    dropped = rec.record(agent, later("never"))
    dropped.release()
    assert converted == []  # recording converts nothing
    assert steps(rec.trace(), "a") == ["one"]
    assert steps(rec.trace(), "a") == ["one"]
    assert converted == ["one"]


def test_several_roots_share_a_new_root_and_empty_agents_can_be_left_out() -> None:
    rec = TraceRecorder()
    first = rec.agent_started("w1", "writer")
    rec.record(first, call("draft", "a draft"))
    idle = rec.agent_started("idle", "helper", parent=first)
    rec.agent_started("idler", "helper", parent=idle)
    second = rec.agent_started("r1", "reviewer")
    rec.record(second, call("review", "looks good"))

    trace = rec.trace(name="team")
    root = trace.agent_instance_by_id[trace.root_agent_instance_id]
    assert root.name == "team" and root.interactions == ["w1", "r1"]
    assert steps(trace, "w1") == ["a draft", "<helper>"]  # kept, though it made no call
    assert steps(trace, "idle") == ["<helper>"]

    pruned = rec.trace(name="team", drop_empty=True)
    assert set(pruned.agent_instance_by_id) == {pruned.root_agent_instance_id, "w1", "r1"}
    assert steps(pruned, "w1") == ["a draft"]


def test_mistakes_are_named() -> None:
    rec = TraceRecorder(kind="workers")
    with pytest.raises(ComposoValidationError, match="worker saw nothing"):
        rec.trace(missing="trace: the worker saw nothing")
    with pytest.raises(LookupError, match="'ghost' has not started"):
        rec.agent_started("x", "x", parent="ghost")
    with pytest.raises(LookupError, match="'ghost' has not started"):
        rec.record("ghost", call("q", "a"))
    root = rec.agent_started("same", "outer")
    rec.agent_started("empty", "inner", parent=root)
    with pytest.raises(ComposoValidationError, match="no model call was recorded"):
        rec.trace()
    rec.record(rec.agent_started("same", "inner", parent=root), call("q", "a"))
    with pytest.raises(ComposoValidationError, match="'same' is used by two workers"):
        rec.trace()


def test_tool_events_fill_in_what_the_model_calls_do_not_carry() -> None:
    rec = TraceRecorder()
    agent = rec.agent_started("a", "agent")
    rec.tool_called(agent, ToolCall(id="t0", name="early", parameters="{}"))  # no call yet
    asked = ToolCall(id="t1", name="get_weather", parameters='{"city": "Oslo"}')
    rec.record(agent, call("Weather in Oslo?", "Checking."))
    rec.tool_called(agent, asked)
    rec.tool_responded(agent, ToolResponse(id="t1", response="sunny", name="get_weather"))
    carried = LLMInteraction(
        input_messages=[
            InputMessage(
                role="tool", type="tool_response", content=ToolResponse(id="t2", response="x")
            )
        ],
        output_messages=[OutputMessage(type="tool_call", content=asked)],
    )
    rec.record(agent, call("", "It is sunny."))
    rec.tool_responded(agent, ToolResponse(id="t2", response="x"))  # already in the next call
    rec.tool_called(agent, asked)  # already in the latest call's output
    rec.record(agent, carried)

    first, second, third = rec.trace().agent_instance_by_id["a"].interactions
    assert isinstance(first, LLMInteraction) and isinstance(second, LLMInteraction)
    assert [m.content for m in first.output_messages] == ["Checking.", asked]
    assert second.input_messages[-1] == InputMessage(
        role="tool",
        type="tool_response",
        content=ToolResponse(id="t1", response="sunny", name="get_weather"),
    )
    assert third == carried  # nothing added twice


def test_threads_record_into_one_recorder_while_it_is_read() -> None:
    rec = TraceRecorder()
    root = rec.agent_started("root", "orchestrator")
    per_thread, threads = 300, 6
    start = threading.Barrier(threads + 1)

    def work(n: int) -> None:
        agent = rec.agent_started(f"w{n}", "worker", parent=root)
        start.wait()
        for i in range(per_thread):
            place = rec.reserve(agent)
            if i % 3 == 0:
                place.release()
            else:
                place.fill(call(f"{n}", f"{n}-{i}"))
        rec.agent_finished(agent)

    pool = [threading.Thread(target=work, args=(n,)) for n in range(threads)]
    for t in pool:
        t.start()
    start.wait()
    while any(t.is_alive() for t in pool):
        rec.interaction_count()
        with contextlib.suppress(ComposoValidationError):  # no call finished yet
            rec.trace()
    for t in pool:
        t.join()
    trace = rec.trace()
    for n in range(threads):
        assert steps(trace, f"w{n}") == [f"{n}-{i}" for i in range(per_thread) if i % 3]
    assert rec.open_agents == 1


async def test_capture_blocks_record_once_with_or_async_with() -> None:
    class Block(Capture):
        _again = "{self!r} is spent"

        def __init__(self) -> None:
            self.events: list[str] = []

        def __repr__(self) -> str:
            return "Block()"

        def _activate(self) -> None:
            self.events.append("on")

        def _deactivate(self) -> None:
            self.events.append("off")

    with pytest.raises(KeyError):
        async with Block() as block:
            assert block._state == "running"
            raise KeyError("x")
    assert block.events == ["on", "off"] and block._state == "closed"
    with pytest.raises(RuntimeError, match=r"Block\(\) is spent"):
        async with block:
            pass
    with pytest.raises(RuntimeError, match="spent"), block:
        pass
    with Block() as other:
        pass
    assert block.events == ["on", "off"] and other.events == ["on", "off"]


def test_lazy_exports_load_names_on_first_use(monkeypatch: pytest.MonkeyPatch) -> None:
    module = types.ModuleType("lazy_demo")
    monkeypatch.setitem(sys.modules, "lazy_demo", module)
    module.__getattr__, module.__dir__ = lazy_exports(  # type: ignore[method-assign]
        "lazy_demo",
        {
            "Agent": "composo.tracing._recorder",
            "inputs": "composo._core.trace:input_messages",
            "missing": "composo.ext",
        },
    )
    assert "Agent" in dir(module) and "Agent" not in vars(module)
    assert module.Agent is Agent
    assert vars(module)["Agent"] is Agent  # cached: later reads are plain
    assert module.inputs is to_trace_inputs  # defined under another name
    with pytest.raises(AttributeError, match="'lazy_demo' has no attribute 'nothing'"):
        _ = module.nothing
    with pytest.raises(AttributeError):
        _ = module.missing  # listed, but its module has no such name


def test_chat_messages_convert_to_trace_messages_and_tools() -> None:
    chat = [
        {"role": "user", "content": "Weather in Oslo?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "function": {"name": "get_weather", "arguments": {"city": "Oslo"}}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
    ]
    plain = to_trace_inputs(chat)
    assert [m.type for m in plain] == ["text", "tool_call", "tool_response"]
    assert plain[1].content == ToolCall(id="c1", name="get_weather", parameters='{"city": "Oslo"}')
    assert plain[2].content == ToolResponse(id="c1", response="sunny")
    named = to_trace_inputs(chat, name_responses=True)[2].content
    assert isinstance(named, ToolResponse) and named.name == "get_weather"
    assert chat[1]["content"] is None  # the caller's messages are left as they were

    empty = [{"role": "assistant", "content": ""}]
    assert to_trace_outputs(empty) == []
    assert to_trace_outputs(empty, keep_empty=True) == [OutputMessage(type="text", content="")]

    tool = to_trace_tool(
        {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}
    )
    assert (tool.name, tool.parameters) == ("f", '{"type": "object"}')
    assert to_trace_tool({"type": "web_search"}).name == "web_search"


def test_importing_composo_ext_loads_nothing_until_a_name_is_used() -> None:
    code = (
        "import sys, composo.ext\n"
        "heavy = ['composo._background', 'composo.tracing._spans']\n"
        "assert not [m for m in heavy if m in sys.modules], sorted(sys.modules)\n"
        "from composo.ext import TraceRecorder\n"
        "assert 'composo.tracing._recorder' in sys.modules\n"
        "assert 'composo._background' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
