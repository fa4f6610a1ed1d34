"""Composo: score LLM answers, tool calls and agent runs against plain-English criteria.

Importing this package loads only httpx, pydantic, tenacity and pluggy. Tracing names
(``ComposoTracer``, ``Instruments``, ``AgentTracer``, ``agent_tracer``) load OpenTelemetry on
first use and need the ``tracing`` extra; ``trace_from_otlp`` (reading OTLP/JSON exports) loads
on first use and needs nothing optional.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from composo import criteria
from composo._core.client import Composo
from composo._core.plugins import hookimpl
from composo._core.responses import EvaluationResponse, MultiAgentTraceResponse, TaskInfo
from composo._core.trace import (
    AgentInstance,
    InputMessage,
    LLMInteraction,
    MultiAgentTrace,
    OutputMessage,
    ToolCall,
    ToolResponse,
    ToolSpec,
    trace_from_messages,
)
from composo._core.wire import MODEL_CORES, ModelCore
from composo._version import __version__
from composo.errors import (
    APIConnectionError,
    APIError,
    APIStatusError,
    APITimeoutError,
    AuthenticationError,
    BadRequestError,
    ComposoError,
    ComposoValidationError,
    MalformedError,
    NotFoundError,
    PermissionDeniedError,
    RateLimitError,
    RequestTooLargeError,
    TaskFailedError,
)

if TYPE_CHECKING:
    from composo._core.async_client import AsyncComposo
    from composo._core.options import EvaluateOptions
    from composo._core.plan import BatchResult
    from composo.tracing import AgentTracer, ComposoTracer, Instruments, agent_tracer
    from composo.tracing._otlp import trace_from_otlp

# Loaded on first use: AsyncComposo pulls in asyncio, tracing OpenTelemetry; batch is rarely
# needed by a plain evaluate().
_LAZY = {
    "AsyncComposo": "composo._core.async_client",
    "BatchResult": "composo._core.plan",
    "EvaluateOptions": "composo._core.options",
    "ComposoTracer": "composo.tracing",
    "Instruments": "composo.tracing",
    "AgentTracer": "composo.tracing",
    "agent_tracer": "composo.tracing",
    "trace_from_otlp": "composo.tracing",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'composo' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "MODEL_CORES",
    "APIConnectionError",
    "APIError",
    "APIStatusError",
    "APITimeoutError",
    "AgentInstance",
    "AgentTracer",
    "AsyncComposo",
    "AuthenticationError",
    "BadRequestError",
    "BatchResult",
    "Composo",
    "ComposoError",
    "ComposoTracer",
    "ComposoValidationError",
    "EvaluateOptions",
    "EvaluationResponse",
    "InputMessage",
    "Instruments",
    "LLMInteraction",
    "MalformedError",
    "ModelCore",
    "MultiAgentTrace",
    "MultiAgentTraceResponse",
    "NotFoundError",
    "OutputMessage",
    "PermissionDeniedError",
    "RateLimitError",
    "RequestTooLargeError",
    "TaskFailedError",
    "TaskInfo",
    "ToolCall",
    "ToolResponse",
    "ToolSpec",
    "__version__",
    "agent_tracer",
    "criteria",
    "hookimpl",
    "trace_from_messages",
    "trace_from_otlp",
]
