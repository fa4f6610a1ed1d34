"""Turn a running agent into a ``MultiAgentTrace``: ``ComposoTracer``, ``Instruments``,
``AgentTracer``, ``agent_tracer``.

``AgentTracer`` and ``agent_tracer`` need nothing optional (integrations can feed them calls
through ``composo.tracing._context.record_interaction``); ``ComposoTracer`` needs OpenTelemetry
and OpenInference (``pip install 'composo[tracing]'``) and loads them on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from composo.tracing._agent import AgentTracer, agent_tracer
    from composo.tracing._context import current_tracer, record_interaction
    from composo.tracing._instruments import Instrument, Instruments
    from composo.tracing._tracer import ComposoTracer

__all__ = [
    "AgentTracer",
    "ComposoTracer",
    "Instrument",
    "Instruments",
    "agent_tracer",
    "current_tracer",
    "record_interaction",
]

_WHERE = {
    "AgentTracer": "composo.tracing._agent",
    "agent_tracer": "composo.tracing._agent",
    "current_tracer": "composo.tracing._context",
    "record_interaction": "composo.tracing._context",
    "Instrument": "composo.tracing._instruments",
    "Instruments": "composo.tracing._instruments",
    "ComposoTracer": "composo.tracing._tracer",
}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'composo.tracing' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
