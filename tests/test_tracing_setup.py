"""``ComposoTracer`` and ``Instruments``: the user's OpenTelemetry setup is reused and never
replaced, instruments come from plugins, init is idempotent, shutdown switches capture off, and
the tracing extra is only needed where it is used."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import composo
from composo import (
    AgentTracer,
    ComposoTracer,
    ComposoValidationError,
    Instruments,
    LLMInteraction,
    MultiAgentTrace,
)
from composo.plugins import get_plugin_manager
from tests.support.lazy import lazy_import
from tests.support.openai_standin import OpenAIStandIn, chat_completion

openai = lazy_import("openai")


class EchoInstrument:
    """A third-party framework's instrument: its model calls become OpenInference LLM spans."""

    name = "echo-framework"

    def __init__(self) -> None:
        self.tracer: Any = None

    def instrument(self, tracer_provider: Any) -> None:
        self.tracer = tracer_provider.get_tracer("echo-framework")

    def uninstrument(self) -> None:
        self.tracer = None


ECHO = EchoInstrument()


def echo_chat(prompt: str, model: Callable[[str], str] | None = None) -> str:
    """The framework's chat call; ``model`` is the client it delegates to (as a framework's
    OpenAI chat model delegates to the openai client)."""
    if ECHO.tracer is None:
        return model(prompt) if model else prompt.upper()
    attributes = {
        "openinference.span.kind": "LLM",
        "llm.input_messages.0.message.role": "user",
        "llm.input_messages.0.message.content": prompt,
    }
    with ECHO.tracer.start_as_current_span("EchoChat", attributes=attributes) as span:
        answer = model(prompt) if model else prompt.upper()
        span.set_attribute("llm.output_messages.0.message.role", "assistant")
        span.set_attribute("llm.output_messages.0.message.content", answer)
    return answer


class EchoPlugin:
    @composo.hookimpl
    def composo_instruments(self) -> list[Any]:
        return [ECHO]


@pytest.fixture
def echo_plugin() -> Iterator[None]:
    pm = get_plugin_manager()
    pm.register(EchoPlugin(), name="test.echo")
    try:
        yield
    finally:
        pm.unregister(name="test.echo")


@pytest.fixture
def off() -> Iterator[None]:
    """Tracing starts and ends switched off."""
    ComposoTracer.shutdown()
    yield
    ComposoTracer.shutdown()


@pytest.fixture
def oai(openai_standin: OpenAIStandIn) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=openai_standin.base_url, api_key="sk-test", max_retries=0) as c:
        yield c


def ask(client: openai.OpenAI, text: str) -> str:
    done = client.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": text}]
    )
    return done.choices[0].message.content or ""


def steps(trace: MultiAgentTrace) -> list[LLMInteraction]:
    agent = trace.agent_instance_by_id[trace.root_agent_instance_id]
    return [s for s in agent.interactions if isinstance(s, LLMInteraction)]


def run_python(code: str, env: dict[str, str] | None = None) -> str:
    import os

    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **(env or {})},
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


# -- Instruments ----------------------------------------------------------------------------------


def test_plugin_instrument_is_switched_on_and_captured(
    echo_plugin: None, off: None, oai: openai.OpenAI
) -> None:
    # No Instruments member names it: it is passed as the object (or by its name, below).
    assert Instruments.available()["ECHO_FRAMEWORK"] is ECHO
    ComposoTracer.init(instruments=[Instruments.OPENAI, ECHO])
    assert ECHO.tracer is not None
    assert ComposoTracer.instrumented() == ["openai", "echo-framework"]
    with AgentTracer(name="echo") as tracer:
        echo_chat("hello")
    (step,) = steps(tracer.trace)
    assert step.input_messages[0].content == "hello"
    assert step.output_messages[0].content == "HELLO"
    ComposoTracer.shutdown()
    assert ECHO.tracer is None
    ComposoTracer.init(instruments=["echo-framework"])
    assert ComposoTracer.instrumented() == ["echo-framework"]
    assert ECHO.tracer is not None


def test_framework_llm_span_around_openai_call_counts_once(
    echo_plugin: None, off: None, oai: openai.OpenAI, openai_standin: OpenAIStandIn
) -> None:
    openai_standin.queue_chat(chat_completion(content="from the model"))
    ComposoTracer.init(instruments=[Instruments.OPENAI, ECHO])
    with AgentTracer() as tracer:
        assert echo_chat("wrapped", model=lambda p: ask(oai, p)) == "from the model"
        ask(oai, "direct")
    wrapped, direct = steps(tracer.trace)
    assert wrapped.input_messages[0].content == "wrapped"
    assert wrapped.output_messages[0].content == "from the model"
    assert direct.input_messages[0].content == "direct"


def late_span(name: str) -> Any:
    """Start a span the way OpenInference's LangChain tracer does: without a kind (set by
    ``end_late``), and not made the current span (so it is not the OpenTelemetry parent of what
    runs inside it)."""
    return ComposoTracer.tracer_provider().get_tracer("late-framework").start_span(name)


def end_late(span: Any, kind: str | None, prompt: str = "", answer: str = "") -> None:
    if kind is not None:
        span.set_attribute("openinference.span.kind", kind)
    if kind == "LLM":
        span.set_attributes(
            {
                "llm.input_messages.0.message.role": "user",
                "llm.input_messages.0.message.content": prompt,
                "llm.output_messages.0.message.role": "assistant",
                "llm.output_messages.0.message.content": answer,
            }
        )
    span.end()


def late_chat(prompt: str, answer: str, kind: str | None = "LLM") -> None:
    span = late_span("LateChat")
    end_late(span, kind, prompt, answer)


def test_span_labelled_llm_only_at_its_end_keeps_its_place(
    off: None, oai: openai.OpenAI, openai_standin: OpenAIStandIn
) -> None:
    from composo.tracing._tracer import _processors

    openai_standin.on_chat(lambda body: chat_completion(content="ok"))
    ComposoTracer.init(instruments=Instruments.OPENAI)
    with AgentTracer() as tracer:
        ask(oai, "first")
        chain = late_span("Chain")
        late_chat("middle", "from the framework")
        end_late(chain, "CHAIN")
        late_chat("never labelled", "-", kind=None)
        ask(oai, "last")
    assert [s.input_messages[0].content for s in steps(tracer.trace)] == [
        "first",
        "middle",
        "last",
    ]
    assert steps(tracer.trace)[1].output_messages[0].content == "from the framework"
    assert _processors[ComposoTracer.tracer_provider()].pending() == 0


def test_span_labelled_at_its_end_keeps_its_place_while_it_runs(
    off: None, oai: openai.OpenAI, openai_standin: OpenAIStandIn
) -> None:
    """Ordered by when calls started: a framework's call that starts first and ends last."""
    openai_standin.on_chat(lambda body: chat_completion(content="inner answer"))
    ComposoTracer.init(instruments=Instruments.OPENAI)
    with AgentTracer() as tracer:
        outer = late_span("Planner")
        ask(oai, "inner")
        end_late(outer, "LLM", "plan", "a different answer")
    assert [s.input_messages[0].content for s in steps(tracer.trace)] == ["plan", "inner"]


def test_late_labelled_call_inside_another_counts_once(off: None) -> None:
    """A model call inside another one (its OpenTelemetry descendant, through a span that is not
    a model call) is part of it, even when both are only labelled as they end."""
    ComposoTracer.init(instruments=Instruments.OPENAI)
    framework = ComposoTracer.tracer_provider().get_tracer("late-framework")
    chain = {"openinference.span.kind": "CHAIN"}
    with AgentTracer() as tracer:
        with framework.start_as_current_span("Wrapper", end_on_exit=False) as outer:
            with framework.start_as_current_span("Parser", attributes=chain):
                late_chat("inner", "same")
            end_late(outer, "LLM", "outer", "same")
        late_chat("after", "next")
    assert [s.input_messages[0].content for s in steps(tracer.trace)] == ["outer", "after"]


@pytest.fixture
def integrations_missing() -> Iterator[None]:
    """As if no integration package were installed: their plugins are set aside for the test."""
    pm = get_plugin_manager()
    aside = [
        (name, plugin)
        for name, plugin in pm.list_name_plugin()
        if hasattr(plugin, "composo_instruments") and name is not None
    ]
    for name, _ in aside:
        pm.unregister(name=name)
    try:
        yield
    finally:
        for name, plugin in aside:
            pm.register(plugin, name=name)


def test_a_member_whose_integration_is_missing_says_what_to_install(
    integrations_missing: None, off: None
) -> None:
    with pytest.raises(ImportError) as err:
        ComposoTracer.init(instruments=[Instruments.OPENAI, Instruments.LANGCHAIN])
    assert str(err.value) == (
        "Instruments.LANGCHAIN comes with langchain-composo: "
        "pip install 'langchain-composo[tracing]'"
    )
    with pytest.raises(ImportError, match="pip install 'llama-index-evaluation-composo'"):
        ComposoTracer.init(instruments="llama-index")
    assert ComposoTracer.instrumented() == []  # nothing switched on, OpenAI included


def test_a_member_whose_instrumentor_is_missing_says_what_to_install(
    off: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As if openinference-instrumentation-google-genai were not installed.
    monkeypatch.setitem(sys.modules, "openinference.instrumentation.google_genai", None)
    with pytest.raises(ImportError) as err:
        ComposoTracer.init(instruments=[Instruments.OPENAI, Instruments.GOOGLE_GENAI])
    message = str(err.value)
    assert message.startswith("Instruments.GOOGLE_GENAI needs ")
    assert "GoogleGenAIInstrumentor" in message
    assert message.endswith("pip install 'composo[google-genai]'")
    assert ComposoTracer.instrumented() == []


def test_an_unknown_name_lists_the_names_there_are(off: None) -> None:
    with pytest.raises(ComposoValidationError) as err:
        ComposoTracer.init(instruments="nope")
    message = str(err.value)
    assert message.startswith("instruments: no instrument is named 'nope'")
    assert "'openai'" in message
    assert "'google_genai'" in message


def test_installed_integrations_add_their_instruments() -> None:
    pytest.importorskip("llama_index.evaluation.composo")
    pytest.importorskip("langchain_composo")
    assert Instruments.LLAMA_INDEX.resolve().name == "llama_index"
    assert Instruments.LANGCHAIN.resolve().name == "langchain"


@pytest.mark.parametrize("bad", [[object()], 3, [Instruments.OPENAI, 42]])
def test_bad_instruments_value_is_refused(off: None, bad: Any) -> None:
    with pytest.raises(ComposoValidationError, match="instruments"):
        ComposoTracer.init(instruments=bad)
    assert ComposoTracer.instrumented() == []


# -- init, providers, shutdown ---------------------------------------------------------------------


def test_init_is_idempotent(off: None, oai: openai.OpenAI) -> None:
    provider = TracerProvider()
    ComposoTracer.init(instruments=Instruments.OPENAI, tracer_provider=provider)
    ComposoTracer.init(instruments=Instruments.OPENAI)
    ComposoTracer.init(instruments=[Instruments.OPENAI], tracer_provider=provider)
    assert ComposoTracer.instrumented() == ["openai"]
    with AgentTracer() as tracer:
        ask(oai, "once")
    assert len(steps(tracer.trace)) == 1
    with pytest.raises(ComposoValidationError, match="tracer_provider"):
        ComposoTracer.init(tracer_provider=TracerProvider())


def test_users_provider_keeps_receiving_spans(off: None, oai: openai.OpenAI) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    ComposoTracer.init(instruments=Instruments.OPENAI, tracer_provider=provider)
    assert ComposoTracer.tracer_provider() is provider
    with AgentTracer() as tracer:
        ask(oai, "shared")
    ask(oai, "outside")
    assert [s.name for s in exporter.get_finished_spans()] == ["ChatCompletion"] * 2
    assert len(steps(tracer.trace)) == 1
    ComposoTracer.shutdown()
    ask(oai, "after shutdown")
    assert len(exporter.get_finished_spans()) == 2  # un-instrumented; their provider still works
    with provider.get_tracer("app").start_as_current_span("their own"):
        pass
    assert len(exporter.get_finished_spans()) == 3


def test_shutdown_stops_capture_and_init_restarts_it(off: None, oai: openai.OpenAI) -> None:
    ComposoTracer.init()
    assert hasattr(openai.OpenAI.request, "__wrapped__")
    ComposoTracer.shutdown()
    assert not hasattr(openai.OpenAI.request, "__wrapped__")
    with AgentTracer(name="untraced") as tracer:
        ask(oai, "not captured")
    with pytest.raises(ComposoValidationError, match="captured no LLM call"):
        _ = tracer.trace
    ComposoTracer.init()
    with AgentTracer() as again:
        ask(oai, "captured")
    assert len(steps(again.trace)) == 1


def test_global_sdk_provider_is_reused(openai_standin: OpenAIStandIn) -> None:
    out = run_python(
        f"""
        import openai
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
        from composo import AgentTracer, ComposoTracer, Instruments

        exporter = InMemorySpanExporter()
        theirs = TracerProvider()
        theirs.add_span_processor(SimpleSpanProcessor(exporter))
        trace.set_tracer_provider(theirs)
        ComposoTracer.init(instruments=Instruments.OPENAI)
        client = openai.OpenAI(base_url="{openai_standin.base_url}", api_key="sk-test")
        with AgentTracer() as tracer:
            client.chat.completions.create(
                model="gpt-4o-mini", messages=[{{"role": "user", "content": "hi"}}]
            )
        print(trace.get_tracer_provider() is theirs, ComposoTracer.tracer_provider() is theirs)
        print([s.name for s in exporter.get_finished_spans()])
        print(tracer.trace.llm_interaction_count())
        """
    )
    assert out.splitlines() == ["True True", "['ChatCompletion']", "1"]


def test_without_a_provider_the_global_one_is_left_for_the_user(
    openai_standin: OpenAIStandIn,
) -> None:
    out = run_python(
        f"""
        import openai
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from composo import AgentTracer, ComposoTracer

        ComposoTracer.init()
        print(type(trace.get_tracer_provider()).__name__)
        later = TracerProvider()
        trace.set_tracer_provider(later)
        print(trace.get_tracer_provider() is later)
        long_chat = [
            {{"role": "user" if i % 2 == 0 else "assistant", "content": f"m{{i}}"}}
            for i in range(81)
        ]
        client = openai.OpenAI(base_url="{openai_standin.base_url}", api_key="sk-test")
        with AgentTracer() as tracer:
            client.chat.completions.create(model="gpt-4o-mini", messages=long_chat)
        (step,) = tracer.trace.agent_instance_by_id[tracer.agent_id].interactions
        print(len(step.input_messages), step.input_messages[0].content)
        """
    )
    # Composo's own provider keeps long conversations whole (the default limit is 128 attributes).
    assert out.splitlines() == ["ProxyTracerProvider", "True", "81 m0"]


def test_tracing_extra_is_needed_only_where_it_is_used() -> None:
    out = run_python(
        """
        import sys

        class Block:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in ("opentelemetry", "openinference"):
                    raise ImportError(f"No module named {name!r}", name=name)

        sys.meta_path.insert(0, Block())
        import composo
        from composo import AgentTracer, agent_tracer
        from composo.ext import record_interaction
        print(sorted(m for m in ("openai", "opentelemetry") if m in sys.modules))
        try:
            from composo import ComposoTracer
        except ImportError as exc:
            print(exc)
        """
    )
    loaded, error = out.splitlines()
    assert loaded == "[]"
    assert "pip install 'composo[tracing]'" in error


def test_langchain_chat_model_calling_openai_counts_once(
    off: None, oai: openai.OpenAI, openai_standin: OpenAIStandIn
) -> None:
    """LangChain's spans are not the OpenTelemetry parent of the OpenAI span they wrap."""
    pytest.importorskip("langchain_composo")
    from langchain_core.language_models.chat_models import BaseChatModel
    from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
    from langchain_core.outputs import ChatGeneration, ChatResult

    class OpenAIBacked(BaseChatModel):
        @property
        def _llm_type(self) -> str:
            return "openai-backed"

        def _generate(
            self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
        ) -> ChatResult:
            answer = ask(oai, str(messages[-1].content))
            return ChatResult(generations=[ChatGeneration(message=AIMessage(content=answer))])

    openai_standin.queue_chat(
        chat_completion(content="through langchain"), chat_completion(content="direct")
    )
    ComposoTracer.init(instruments=[Instruments.OPENAI, Instruments.LANGCHAIN])
    with AgentTracer() as tracer:
        assert OpenAIBacked().invoke([HumanMessage(content="hi")]).content == "through langchain"
        assert ask(oai, "hi") == "direct"
    wrapped, direct = steps(tracer.trace)
    assert [m.content for m in wrapped.output_messages] == ["through langchain"]
    assert [m.content for m in direct.output_messages] == ["direct"]


def test_an_instrument_whose_instrumentor_is_missing_says_what_to_install() -> None:
    from composo.ext import OpenInferenceInstrument

    class Missing(OpenInferenceInstrument):
        name = "acme-llm"
        module = "openinference.instrumentation.acme_llm_not_installed"
        class_name = "AcmeInstrumentor"
        install = "acme-composo[tracing]"

    instrument = Missing()
    with pytest.raises(ImportError) as info:
        instrument.instrument(tracer_provider=None)
    assert str(info.value).startswith("'acme-llm' needs ")
    assert "pip install 'acme-composo[tracing]'" in str(info.value)
    instrument.uninstrument()  # nothing was switched on: a no-op, not an error


# -- code written for the platform SDK ------------------------------------------------------------


def test_instruments_is_the_platform_sdks_enum() -> None:
    import enum

    assert issubclass(Instruments, enum.Enum)
    assert {m.name: m.value for m in list(Instruments)[:3]} == {
        "OPENAI": "openai",
        "ANTHROPIC": "anthropic",
        "GOOGLE_GENAI": "google_genai",
    }
    assert Instruments("openai") is Instruments.OPENAI
    assert Instruments["GOOGLE_GENAI"] is Instruments.GOOGLE_GENAI
    assert isinstance(Instruments.GOOGLE_GENAI, Instruments)
    assert [m.value for m in Instruments if m.name in ("LANGCHAIN", "LLAMA_INDEX")] == [
        "langchain",
        "llama_index",
    ]
    assert Instruments("llama-index") is Instruments.LLAMA_INDEX  # any spelling of a name
    with pytest.raises(ValueError):
        Instruments("nope")


def test_init_returns_the_provider_spans_go_to(off: None, oai: openai.OpenAI) -> None:
    provider = ComposoTracer.init(instruments=Instruments.OPENAI)
    assert isinstance(provider, TracerProvider)
    assert ComposoTracer.tracer_provider() is provider
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))  # as users of the SDK do
    with AgentTracer(name="asker") as tracer:
        ask(oai, "where do spans go?")
    assert [s.name for s in exporter.get_finished_spans()] == ["ChatCompletion"]
    assert len(steps(tracer.trace)) == 1
    assert ComposoTracer.init(instruments=[Instruments.OPENAI]) is provider  # again: the same


def test_instruments_by_name(off: None, oai: openai.OpenAI) -> None:
    ComposoTracer.init(instruments="openai")
    assert ComposoTracer.instrumented() == ["openai"]
    ComposoTracer.init(instruments=["OpenAI", Instruments.OPENAI])  # already on: left alone
    with AgentTracer() as tracer:
        ask(oai, "once")
    assert len(steps(tracer.trace)) == 1


def test_setup_init_takes_the_platform_sdks_argument(off: None, oai: openai.OpenAI) -> None:
    from composo.tracing import setup

    provider = setup.init()  # the platform SDK's default: no instrument
    assert ComposoTracer.instrumented() == []
    assert setup.init(instrument=[Instruments.OPENAI]) is provider
    assert ComposoTracer.instrumented() == ["openai"]
    with AgentTracer() as tracer:
        ask(oai, "through setup.init")
    assert len(steps(tracer.trace)) == 1


@pytest.mark.parametrize("first", ["module", "package"])
def test_the_platform_sdks_module_paths(first: str) -> None:
    """``composo.tracing.agent_tracer`` is a module (with ``AgentTracer``) and, read from the
    package, the decorator, whichever is imported first (fresh interpreters)."""
    module_first = first == "module"
    out = run_python(
        f"""
        import inspect
        if {module_first}:
            from composo.tracing.agent_tracer import AgentTracer
            from composo.tracing import agent_tracer
        else:
            from composo.tracing import agent_tracer
            from composo.tracing.agent_tracer import AgentTracer
        import composo
        import composo.tracing.agent_tracer
        from composo.tracing import init
        from composo.tracing.setup import init as setup_init

        print(inspect.isfunction(agent_tracer), agent_tracer is composo.agent_tracer)
        print(composo.tracing.agent_tracer is agent_tracer, AgentTracer is composo.AgentTracer)
        print(init is setup_init)

        @agent_tracer(name="decorated")
        def run():
            return "ran"

        print(run())
        """
    )
    assert out.splitlines() == ["True True", "True True", "True", "ran"]


# The attributes OpenInference's Google GenAI instrumentor (1.4) records for a generate_content
# call answering a tool result (google-genai 3.6; output.value and token counts left out).
GEMINI_CALL = {
    "openinference.span.kind": "LLM",
    "llm.provider": "google",
    "llm.model_name": "gemini-2.0-flash",
    "llm.input_messages.0.message.role": "system",
    "llm.input_messages.0.message.content": "Be brief.",
    "llm.input_messages.1.message.role": "user",
    "llm.input_messages.1.message.content": "Umbrella in Oslo?",
    "llm.input_messages.2.message.role": "model",
    "llm.input_messages.2.message.tool_calls.0.tool_call.function.name": "get_weather",
    "llm.input_messages.2.message.tool_calls.0.tool_call.function.arguments": '{"city": "Oslo"}',
    "llm.input_messages.3.message.role": "tool",
    "llm.input_messages.3.message.name": "get_weather",
    "llm.input_messages.3.message.content": '{"rain": true}',
    "llm.tools.0.tool.json_schema": json.dumps(
        {
            "name": "get_weather",
            "description": "Current weather for a city",
            "parameters": {"properties": {"city": {"type": "STRING"}}, "type": "OBJECT"},
        }
    ),
    "llm.output_messages.0.message.role": "model",
    "llm.output_messages.0.message.content": "Take an umbrella.",
}


def test_gemini_calls_are_interactions_with_the_model_as_assistant(off: None) -> None:
    provider = ComposoTracer.init(instruments=[])
    with AgentTracer(name="forecaster") as tracer:
        provider.get_tracer("gemini").start_span("GenerateContent", attributes=GEMINI_CALL).end()
    (step,) = steps(tracer.trace)
    assert [(m.role, m.type) for m in step.input_messages] == [
        ("system", "text"),
        ("user", "text"),
        ("assistant", "tool_call"),
        ("tool", "tool_response"),
    ]
    assert step.output_messages[0].content == "Take an umbrella."
    assert [t.name for t in step.tools_available or []] == ["get_weather"]
