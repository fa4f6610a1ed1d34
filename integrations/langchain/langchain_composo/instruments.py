"""``Instruments.LANGCHAIN``: LangChain and LangGraph model calls as OpenInference spans, so an
``AgentTracer`` captures them like OpenAI client calls.

OpenInference's LangChain tracer labels a span ``LLM`` only when the run ends; Composo's span
processor keeps a place for such spans from their start, so nothing beyond OpenInference's own
instrumentor is needed here.
"""

from __future__ import annotations

from composo.ext import OpenInferenceInstrument

__all__ = ["LangChainInstrument"]


class LangChainInstrument(OpenInferenceInstrument):
    """Switches OpenInference's LangChain instrumentor on for a tracer provider.

    It adds a tracer to every LangChain callback manager, so model calls made anywhere in a
    chain, agent or LangGraph graph become LLM spans.
    """

    name = "langchain"
    module = "openinference.instrumentation.langchain"
    class_name = "LangChainInstrumentor"
    install = "langchain-composo[tracing]"
