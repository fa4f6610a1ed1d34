"""Turn a running agent into a ``MultiAgentTrace``: ``ComposoTracer``, ``Instruments``,
``AgentTracer``, ``agent_tracer``.

Only ``ComposoTracer`` needs OpenTelemetry and OpenInference (``pip install 'composo[tracing]'``),
loaded on first use. ``composo.tracing.agent_tracer`` and ``composo.tracing.setup`` are the
platform SDK's module paths; ``composo.tracing.agent_tracer`` read as a name is the decorator.
"""

from __future__ import annotations

import sys
import types
from typing import TYPE_CHECKING, Any

from composo._lazy import lazy_exports

if TYPE_CHECKING:
    from composo.tracing._agent import AgentTracer, agent_tracer, current_tracer, record_interaction
    from composo.tracing._instruments import Instrument, Instruments
    from composo.tracing._otlp import read_otlp, trace_from_otlp
    from composo.tracing._recorder import TraceRecorder
    from composo.tracing._spantree import Converted, SpanRecord, convert_spans
    from composo.tracing._tracer import ComposoTracer
    from composo.tracing.setup import init as init  # the platform SDK's, not in __all__

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
        "current_tracer": "._agent",
        "record_interaction": "._agent",
        "Instrument": "._instruments",
        "Instruments": "._instruments",
        "TraceRecorder": "._recorder",
        "ComposoTracer": "._tracer",
        "Converted": "._spantree",
        "SpanRecord": "._spantree",
        "convert_spans": "._spantree",
        "read_otlp": "._otlp",
        "trace_from_otlp": "._otlp",
        "init": ".setup",  # the platform SDK's composo.tracing.init
    },
)


class _Package(types.ModuleType):
    """This package, keeping the name ``agent_tracer`` for the decorator: the import system
    would bind the submodule of that name here once it is loaded."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "agent_tracer" and isinstance(value, types.ModuleType):
            return  # the decorator loads through __getattr__ when first read
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
