"""``Instruments.LANGCHAIN``: LangChain and LangGraph model calls as OpenInference spans, so an
``AgentTracer`` captures them like OpenAI client calls.

OpenInference's LangChain tracer starts every span without its kind and only labels it ``LLM``
when the run ends, but a span is assigned to the active ``AgentTracer`` when it starts (that is
what keeps calls in order and apart across threads). So the instrument labels chat model and LLM
spans at their start: it notes the run type while OpenInference handles a model-start event and
adds the label as the span is created. Everything else is OpenInference's own behaviour.
"""

from __future__ import annotations

import functools
import logging
from contextvars import ContextVar
from typing import Any

__all__ = ["LangChainInstrument"]

_log = logging.getLogger("langchain_composo")

_SPAN_KIND = "openinference.span.kind"
_starting_model_call: ContextVar[bool] = ContextVar("composo_starting_model_call", default=False)


class _LabelModelSpans:
    """Tracer wrapper: spans started while a model run starts get the ``LLM`` kind at once."""

    def __init__(self, tracer: Any) -> None:
        self._composo_tracer = tracer

    def start_span(self, name: str, context: Any = None, *args: Any, **kwargs: Any) -> Any:
        if _starting_model_call.get():
            attributes = dict(kwargs.get("attributes") or {})
            attributes.setdefault(_SPAN_KIND, "LLM")
            kwargs["attributes"] = attributes
        return self._composo_tracer.start_span(name, context, *args, **kwargs)

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._composo_tracer, attr)


class _LabellingProvider:
    """Tracer provider wrapper handing out :class:`_LabelModelSpans` tracers."""

    def __init__(self, provider: Any) -> None:
        self._provider = provider

    def get_tracer(self, *args: Any, **kwargs: Any) -> Any:
        return _LabelModelSpans(self._provider.get_tracer(*args, **kwargs))

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._provider, attr)


def _marking_model_start(method: Any) -> Any:
    @functools.wraps(method)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        token = _starting_model_call.set(True)
        try:
            return method(*args, **kwargs)
        finally:
            _starting_model_call.reset(token)

    return wrapper


class LangChainInstrument:
    """Switches OpenInference's LangChain instrumentor on for a tracer provider.

    It adds a tracer to every LangChain callback manager, so model calls made anywhere in a
    chain, agent or LangGraph graph become LLM spans.
    """

    name = "langchain"

    def __init__(self) -> None:
        self._instrumentor: Any = None

    def __repr__(self) -> str:
        return "Instruments.LANGCHAIN"

    def instrument(self, tracer_provider: Any) -> None:
        try:
            from openinference.instrumentation.langchain import LangChainInstrumentor
        except ImportError as exc:
            raise ImportError(
                "Instruments.LANGCHAIN needs OpenInference's LangChain instrumentor "
                f"({exc.name or exc} is missing): pip install 'langchain-composo[tracing]'"
            ) from exc
        instrumentor = LangChainInstrumentor()
        if instrumentor.is_instrumented_by_opentelemetry:
            # The application switched it on itself; its spans go to the provider it chose.
            _log.info("LangChain is already instrumented; using its spans")
            return
        instrumentor.instrument(tracer_provider=_LabellingProvider(tracer_provider))
        self._instrumentor = instrumentor
        handler = getattr(instrumentor, "_tracer", None)
        if handler is None or not hasattr(handler, "on_chat_model_start"):
            _log.warning(
                "this version of openinference-instrumentation-langchain is not supported for "
                "AgentTracer: LangChain spans are exported, but model calls are not captured"
            )
            return
        for event in ("on_chat_model_start", "on_llm_start"):
            setattr(handler, event, _marking_model_start(getattr(handler, event)))

    def uninstrument(self) -> None:
        if self._instrumentor is not None:
            self._instrumentor.uninstrument()
            self._instrumentor = None
