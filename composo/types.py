"""The data the SDK sends and returns, for annotations and ``isinstance`` checks.

Wire requests (:class:`RewardRequest`, :class:`TraceRequest`), the trace models that make up a
:class:`MultiAgentTrace`, responses and where they came from (:class:`Provenance`), the account
and history answers (:class:`Usage`, :class:`EvaluationPage`, :class:`TracePage`), batch results
and :class:`EvaluateOptions` (the keyword options every ``evaluate*`` method takes, for annotating
code that passes them on). Building any of them by hand is supported; their module paths are
not: import them from here or from ``composo``.
"""

from __future__ import annotations

from composo._core.cores import MODEL_CORES, ModelCore
from composo._core.options import EvaluateOptions
from composo._core.plan import BatchResult, BatchResults
from composo._core.provenance import Provenance
from composo._core.ratelimit import RateLimits
from composo._core.responses import (
    AgentResult,
    EvaluationResponse,
    InstanceResult,
    MultiAgentTraceResponse,
    Source,
    SummaryStatistics,
    TaskInfo,
)
from composo._core.trace import (
    AgentInstance,
    InputMessage,
    LLMInteraction,
    MultiAgentTrace,
    OutputMessage,
    ToolCall,
    ToolResponse,
    ToolSpec,
)
from composo._core.wire import RewardRequest, TraceRequest
from composo._platform_types import (
    EvaluationPage,
    EvaluationRecord,
    TraceComment,
    TraceEvaluation,
    TracePage,
    TraceRecord,
    Usage,
    UsageCounts,
)

__all__ = [
    "MODEL_CORES",
    "AgentInstance",
    "AgentResult",
    "BatchResult",
    "BatchResults",
    "EvaluateOptions",
    "EvaluationPage",
    "EvaluationRecord",
    "EvaluationResponse",
    "InputMessage",
    "InstanceResult",
    "LLMInteraction",
    "ModelCore",
    "MultiAgentTrace",
    "MultiAgentTraceResponse",
    "OutputMessage",
    "Provenance",
    "RateLimits",
    "RewardRequest",
    "Source",
    "SummaryStatistics",
    "TaskInfo",
    "ToolCall",
    "ToolResponse",
    "ToolSpec",
    "TraceComment",
    "TraceEvaluation",
    "TracePage",
    "TraceRecord",
    "TraceRequest",
    "Usage",
    "UsageCounts",
]
