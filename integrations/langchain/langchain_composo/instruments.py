"""``Instruments.LANGCHAIN``: LangChain and LangGraph model calls as OpenInference spans, so an
``AgentTracer`` captures them like OpenAI client calls."""

from __future__ import annotations

from composo.ext import OpenInferenceInstrument

__all__ = ["LangChainInstrument"]


class LangChainInstrument(OpenInferenceInstrument):
    """OpenInference's LangChain instrumentor: model calls anywhere in a chain, agent or
    LangGraph graph become LLM spans."""

    name = "langchain"
    module = "openinference.instrumentation.langchain"
    class_name = "LangChainInstrumentor"
    install = "langchain-composo[tracing]"
