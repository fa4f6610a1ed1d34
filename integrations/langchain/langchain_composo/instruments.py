"""``Instruments.LANGCHAIN``: LangChain and LangGraph model calls as OpenInference spans, so an
``AgentTracer`` captures them like OpenAI client calls.

OpenInference's LangChain tracer labels a span ``LLM`` only when the run ends; Composo's span
processor keeps a place for such spans from their start, so nothing beyond OpenInference's own
instrumentor is needed here.
"""

from __future__ import annotations

import logging
from typing import Any

__all__ = ["LangChainInstrument"]

_log = logging.getLogger("langchain_composo")


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
        instrumentor.instrument(tracer_provider=tracer_provider)
        self._instrumentor = instrumentor

    def uninstrument(self) -> None:
        if self._instrumentor is not None:
            self._instrumentor.uninstrument()
            self._instrumentor = None
