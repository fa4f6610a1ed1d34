"""Turn a running agent into a ``MultiAgentTrace``: ``ComposoTracer``, ``Instruments``,
``AgentTracer``, ``agent_tracer``.

``AgentTracer``, ``agent_tracer`` and ``TraceRecorder`` (which every capture records into) need
nothing optional (integrations feed calls through ``composo.ext.record_interaction``);
``ComposoTracer`` needs OpenTelemetry and OpenInference (``pip install 'composo[tracing]'``) and
loads them on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from composo._core.lazy import lazy_exports

if TYPE_CHECKING:
    from composo.tracing._agent import AgentTracer, agent_tracer
    from composo.tracing._context import current_tracer, record_interaction
    from composo.tracing._instruments import Instrument, Instruments
    from composo.tracing._otlp import read_otlp, trace_from_otlp
    from composo.tracing._recorder import TraceRecorder
    from composo.tracing._spantree import Converted, SpanRecord, convert_spans
    from composo.tracing._tracer import ComposoTracer

__all__ = [
    "AgentTracer",
    "ComposoTracer",
    "Converted",
    "Instrument",
    "Instruments",
    "SpanRecord",
    "TraceRecorder",
    "agent_tracer",
    "convert_spans",
    "current_tracer",
    "read_otlp",
    "record_interaction",
    "trace_from_otlp",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "AgentTracer": "._agent",
        "agent_tracer": "._agent",
        "current_tracer": "._context",
        "record_interaction": "._context",
        "Instrument": "._instruments",
        "Instruments": "._instruments",
        "TraceRecorder": "._recorder",
        "ComposoTracer": "._tracer",
        "Converted": "._spantree",
        "SpanRecord": "._spantree",
        "convert_spans": "._spantree",
        "read_otlp": "._otlp",
        "trace_from_otlp": "._otlp",
    },
)
