"""Composo: score LLM answers, tool calls and agent runs against plain-English criteria.

Importing this package loads only the criteria, the errors and the version; every other name
loads its module on first use (``from composo import Composo`` loads the client and httpx, and
pydantic's models are built by the first call). Tracing names (``ComposoTracer``,
``Instruments``, ``AgentTracer``, ``agent_tracer``) load OpenTelemetry on first use and need the
``tracing`` extra; ``trace_from_otlp`` (reading OTLP/JSON exports) needs nothing optional.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from composo import criteria
from composo._lazy import lazy_exports
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
    RequestTimeoutError,
    RequestTooLargeError,
    TaskFailedError,
)

if TYPE_CHECKING:
    from composo._async_client import AsyncComposo
    from composo._cache import CachingTransport, ResultCache
    from composo._client import Composo
    from composo._core.plugins import hookimpl
    from composo._core.trace import trace_from_messages
    from composo.tracing import AgentTracer, ComposoTracer, Instruments, agent_tracer
    from composo.tracing._otlp import trace_from_otlp

    # the models, as composo.types holds them (each loads from its own module below)
    from composo.types import (
        MODEL_CORES,
        AgentInstance,
        BatchResult,
        EvaluateOptions,
        EvaluationResponse,
        InputMessage,
        LLMInteraction,
        ModelCore,
        MultiAgentTrace,
        MultiAgentTraceResponse,
        OutputMessage,
        TaskInfo,
        ToolCall,
        ToolResponse,
        ToolSpec,
    )


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
    "CachingTransport",
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
    "RequestTimeoutError",
    "RequestTooLargeError",
    "ResultCache",
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

# module -> the names it gives, each loaded on first use: the clients (httpx), the models
# (pydantic), the plugin manager (pluggy), AsyncComposo (asyncio), tracing (OpenTelemetry).
_FROM = {
    "composo._client": "Composo",
    "composo._async_client": "AsyncComposo",
    "composo._cache": "CachingTransport ResultCache",
    "composo._core.cores": "MODEL_CORES ModelCore",
    "composo._core.options": "EvaluateOptions",
    "composo._core.plan": "BatchResult",
    "composo._core.plugins": "hookimpl",
    "composo._core.responses": "EvaluationResponse MultiAgentTraceResponse TaskInfo",
    "composo._core.trace": "AgentInstance InputMessage LLMInteraction MultiAgentTrace "
    "OutputMessage ToolCall ToolResponse ToolSpec trace_from_messages",
    "composo.tracing": "AgentTracer ComposoTracer Instruments agent_tracer trace_from_otlp",
    "composo._agreement": "agreement",
}
__getattr__, __dir__ = lazy_exports(
    __name__, {name: m for m, names in _FROM.items() for name in names.split()}
)
