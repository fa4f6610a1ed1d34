"""``Instruments.LLAMA_INDEX``: LlamaIndex LLM calls made inside an ``AgentTracer`` become its
interactions. Free of LlamaIndex imports: every installed plugin's instruments are listed, and
this one loads LlamaIndex only when it is switched on."""

from __future__ import annotations

import threading
from typing import Any

__all__ = ["INSTRUMENT", "LlamaIndexInstrument"]


class LlamaIndexInstrument:
    """Listens on LlamaIndex's instrumentation dispatcher (no OpenTelemetry spans needed).

    It records LlamaIndex's own LLM events, so switch on ``Instruments.OPENAI`` as well only
    for OpenAI calls made outside LlamaIndex: a LlamaIndex OpenAI LLM would be seen by both.
    """

    name = "llama_index"

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._on = False

    def instrument(self, tracer_provider: Any = None) -> None:
        """Start forwarding; calling it again does nothing."""
        from llama_index.evaluation.composo.tracing import _hub

        with self._lock:
            if not self._on:
                _hub.acquire(forward=True)
                self._on = True

    def uninstrument(self) -> None:
        from llama_index.evaluation.composo.tracing import _hub

        with self._lock:
            if self._on:
                _hub.release(forward=True)
                self._on = False

    @property
    def instrumented(self) -> bool:
        return self._on

    def __repr__(self) -> str:
        return f"LlamaIndexInstrument(instrumented={self._on})"


INSTRUMENT = LlamaIndexInstrument()
"""The one instance ``Instruments.LLAMA_INDEX`` resolves to."""
