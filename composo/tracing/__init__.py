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

# module -> the names it gives, each loaded on first use (init: the platform SDK's)
_FROM = {
    "._agent": "AgentTracer agent_tracer current_tracer record_interaction",
    "._instruments": "Instrument Instruments",
    "._recorder": "TraceRecorder",
    "._tracer": "ComposoTracer",
    "._spantree": "Converted SpanRecord convert_spans",
    "._otlp": "read_otlp trace_from_otlp",
    ".setup": "init",
}
__getattr__, __dir__ = lazy_exports(
    __name__, {name: m for m, names in _FROM.items() for name in names.split()}
)


class _Package(types.ModuleType):
    """This package, keeping the name ``agent_tracer`` for the decorator: the import system
    would bind the submodule of that name here once it is loaded."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "agent_tracer" and isinstance(value, types.ModuleType):
            return  # the decorator loads through __getattr__ when first read
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
