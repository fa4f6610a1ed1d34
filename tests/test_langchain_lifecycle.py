"""ComposoCallback made per request: what it holds while alive, what it leaves once dropped or
closed, its ``with`` form, and what its records say about what was evaluated (real langchain /
langgraph objects, local server)."""

from __future__ import annotations

import asyncio
import gc
import logging
import threading
import weakref
from typing import TYPE_CHECKING, Any

import pytest

from composo import Composo
from tests.support.lazy import lazy_import
from tests.support.servers import ServerProcess
from tests.test_langchain_trace import trace_bodies

if TYPE_CHECKING:
    from langchain_composo import ComposoCallback

fakes = lazy_import("tests.support.langchain_models")

# A global: ``@tool`` resolves its functions' annotations in the module's namespace.
runnables = lazy_import("langchain_core.runnables")

CRITERION = "Reward answers that address the user's question"


def answer_once(cb: ComposoCallback, text: str = "Paris.") -> None:
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage, HumanMessage

    model = GenericFakeChatModel(messages=iter([AIMessage(text)]))
    model.invoke([HumanMessage("Capital of France?")], config={"callbacks": [cb]})


def request_handler(
    client: Composo | None, criteria: list[str] | None = None
) -> weakref.ref[ComposoCallback]:
    """What a web handler does: a callback for one request, flushed, then forgotten."""
    from langchain_composo import ComposoCallback

    cb = ComposoCallback(criteria=criteria or CRITERION, client=client)
    answer_once(cb)
    assert cb.flush(timeout=30)
    assert [r.ok for r in cb.results] == [True] * len(criteria or [CRITERION])
    return weakref.ref(cb)


def threads_after_gc() -> set[threading.Thread]:
    gc.collect()
    return set(threading.enumerate())


@pytest.mark.slow
@pytest.mark.parametrize("own_client", [False, True], ids=["given-client", "default-client"])
def test_callbacks_made_per_request_and_dropped_leave_no_thread(
    own_client: bool, client: Composo, composo_env: ServerProcess
) -> None:
    given = None if own_client else client
    # The first use starts the process's one background thread (and, with a blocking client
    # and two requests at once, two threads of the executor its calls share, which may keep a
    # spare one as calls come one after another).
    request_handler(given, [CRITERION, "Passes if the answer is polite"])
    before = threads_after_gc()
    refs = [request_handler(given) for _ in range(20)]
    after = threads_after_gc()
    assert after - before == set(), [t.name for t in after - before]
    assert all(ref() is None for ref in refs)  # nothing kept the dropped callbacks alive
    assert len(composo_env.requests()) == 22


def test_with_block_flushes_and_closes(
    client: Composo, live: ServerProcess, caplog: pytest.LogCaptureFixture
) -> None:
    from langchain_composo import ComposoCallback

    with ComposoCallback(criteria=CRITERION, client=client) as cb:
        answer_once(cb)
    assert cb.closed and cb.pending == 0
    [record] = cb.results
    assert record.ok and record.score is not None
    cb.close()  # closing again is harmless
    with caplog.at_level(logging.WARNING):
        answer_once(cb)  # a closed callback does not evaluate, and never breaks the run
        answer_once(cb)
    assert len(cb.results) == 1
    [warning] = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert warning.name == "langchain_composo" and "is closed" in warning.getMessage()


def test_async_with_block_flushes_and_closes(composo_env: ServerProcess) -> None:
    from langchain_composo import ComposoCallback
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage, HumanMessage

    async def main() -> ComposoCallback:
        async with ComposoCallback(criteria=CRITERION) as cb:
            model = GenericFakeChatModel(messages=iter([AIMessage("Paris.")]))
            await model.ainvoke([HumanMessage("Capital of France?")], config={"callbacks": [cb]})
        return cb

    cb = asyncio.run(main())
    assert cb.closed
    assert [r.ok for r in cb.results] == [True]


def test_record_says_what_was_evaluated(client: Composo, live: ServerProcess) -> None:
    from langchain_composo import ComposoCallback
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage, HumanMessage

    criteria = [CRITERION, "Passes if the answer is polite", "Penalize rambling"]
    with ComposoCallback(criteria=criteria, client=client) as cb:
        model = GenericFakeChatModel(
            messages=iter([AIMessage("Paris is the capital of France.")])
        ).with_config(run_name="geography")
        model.invoke([HumanMessage("What is the capital of France?")], config={"callbacks": [cb]})
    records = sorted(cb.results, key=lambda r: criteria.index(r.criterion))
    assert [r.criterion_kind for r in records] == ["reward", "passes_if", "penalize"]
    for r in records:
        assert r.name == "geography"
        assert r.summary == (
            "user: What is the capital of France? | answer: Paris is the capital of France."
        )
        assert r.evaluated is not None
        assert r.evaluated["messages"] == [
            {"role": "user", "content": "What is the capital of France?"}
        ]
        assert r.evaluated["result"][-1]["content"] == "Paris is the capital of France."
    assert "evaluated=" not in repr(records[0])  # the arguments stay out of the repr


def test_trace_record_names_its_agents(client: Composo, live: ServerProcess) -> None:
    from langchain.agents import create_agent
    from langchain_composo import ComposoCallback
    from langchain_core.messages import AIMessage, HumanMessage

    model = fakes.ToolCallingFakeChat(messages=iter([AIMessage("Hello!")]))
    agent = create_agent(model, tools=[], name="greeter")
    with ComposoCallback(criteria=CRITERION, client=client, mode="trace") as cb:
        agent.invoke({"messages": [HumanMessage("hi")]}, config={"callbacks": [cb]})
    [record] = cb.results
    assert record.name == "greeter"
    assert record.summary == "trace of 1 agent instance(s) (greeter), 1 step(s)"
    assert record.evaluated is not None and "trace" in record.evaluated


def supervisor_with_researcher(pass_config: bool) -> Any:
    from langchain.agents import create_agent
    from langchain_core.messages import AIMessage, HumanMessage
    from langchain_core.tools import tool

    researcher = create_agent(
        fakes.ToolCallingFakeChat(messages=iter([AIMessage("Paris has 2.1 million people.")])),
        tools=[],
        name="researcher",
    )

    if pass_config:

        @tool
        def ask_researcher(question: str, config: runnables.RunnableConfig) -> str:
            """Ask the research assistant a question."""
            reply = researcher.invoke({"messages": [HumanMessage(question)]}, config)
            return str(reply["messages"][-1].content)

    else:

        @tool
        def ask_researcher(question: str) -> str:
            """Ask the research assistant a question."""
            reply = researcher.invoke({"messages": [HumanMessage(question)]})
            return str(reply["messages"][-1].content)

    call = {"name": "ask_researcher", "args": {"question": "Paris size?"}, "id": "r1"}
    return create_agent(
        fakes.ToolCallingFakeChat(
            messages=iter([AIMessage("", tool_calls=[call]), AIMessage("About 2.1 million.")])
        ),
        tools=[ask_researcher],
        name="supervisor",
    )


@pytest.mark.parametrize("pass_config", [True, False], ids=["config-passed", "no-config"])
def test_sub_agent_given_the_callers_config_is_named_after_itself(
    pass_config: bool, client: Composo, live: ServerProcess
) -> None:
    from langchain_composo import ComposoCallback
    from langchain_core.messages import HumanMessage

    supervisor = supervisor_with_researcher(pass_config)
    with ComposoCallback(criteria=CRITERION, client=client, mode="trace") as cb:
        supervisor.invoke(
            {"messages": [HumanMessage("How big is Paris?")]},
            config={"callbacks": [cb], "metadata": {"user": "u1"}},
        )
    assert [r.ok for r in cb.results] == [True]
    [body] = trace_bodies(live)
    agents = body["trace"]["agent_instance_by_id"]
    root = agents[body["trace"]["root_agent_instance_id"]]
    assert root["name"] == "supervisor"
    kinds = ["agent" if isinstance(i, str) else "llm" for i in root["interactions"]]
    assert kinds == ["llm", "agent", "llm"]
    sub = agents[root["interactions"][1]]
    assert sub["name"] == "researcher"
    assert sorted(a["name"] for a in agents.values()) == ["researcher", "supervisor"]
