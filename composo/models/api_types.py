"""The platform SDK's ``composo.models.api_types``, so code written for it imports unchanged.

Each name is this package's own model (new code imports them from :mod:`composo.types`); where
the platform SDK's name differs, ours is given beside it. Its server-side models (evaluators,
comments and ratings requests, the evaluation context) and ``ModelCore`` as an enum have no
counterpart here: model cores are plain strings (``composo.MODEL_CORES``).
"""

from __future__ import annotations

from composo._core.limits import MAX_CRITERION_LENGTH as MAX_EVALUATION_CRITERIA_LENGTH
from composo._core.options import DataRetention
from composo._core.responses import AgentResult as AgentTraceResult
from composo._core.responses import InstanceResult as ScoreResponse
from composo._core.responses import MultiAgentTraceResponse, Source, SummaryStatistics
from composo._core.trace import AgentInstance, LLMInteraction, MultiAgentTrace
from composo._core.trace import InputMessage as LLMInput
from composo._core.trace import OutputMessage as LLMOutput
from composo._core.trace import ToolCall as LLMToolCall
from composo._core.trace import ToolResponse as LLMToolResponse
from composo._core.trace import ToolSpec as LLMToolDefinition
from composo._core.wire import RequestBase, RewardRequest
from composo._core.wire import TraceRequest as TraceRewardRequest
from composo._core.wire import is_binary as is_binary_evaluation
from composo._platform_types import TraceComment as AttachCommentResponse
from composo._platform_types import TraceEvaluation
from composo._platform_types import TracePage as ListTracesResponse
from composo._platform_types import TraceRecord as TraceResponse

__all__ = [
    "MAX_EVALUATION_CRITERIA_LENGTH",
    "AgentInstance",
    "AgentTraceResult",
    "AttachCommentResponse",
    "DataRetention",
    "LLMInput",
    "LLMInteraction",
    "LLMOutput",
    "LLMToolCall",
    "LLMToolDefinition",
    "LLMToolResponse",
    "ListTracesResponse",
    "MultiAgentTrace",
    "MultiAgentTraceResponse",
    "RequestBase",
    "RewardRequest",
    "ScoreResponse",
    "Source",
    "SummaryStatistics",
    "TraceEvaluation",
    "TraceResponse",
    "TraceRewardRequest",
    "is_binary_evaluation",
]
