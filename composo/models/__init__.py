"""The platform SDK's ``composo.models``, so code written for it imports unchanged.

Each name is this package's own model or module, loaded on first use (``from composo.models
import criteria`` loads no model at all); new code imports them from :mod:`composo.types` and
:mod:`composo.criteria`. ``ScoreResponse`` is :class:`~composo.types.InstanceResult`, one agent
instance's verdict inside a trace result; ``RequestBase`` is the base class of both request
models; ``ChatCompletionMessageParam`` is OpenAI's own type and needs ``openai``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from composo._lazy import lazy_exports

if TYPE_CHECKING:
    from openai.types.chat import ChatCompletionMessageParam

    from composo._core.responses import EvaluationResponse
    from composo._core.responses import InstanceResult as ScoreResponse
    from composo._core.wire import RequestBase, RewardRequest
    from composo.models import api_types, criteria

__all__ = [
    "ChatCompletionMessageParam",
    "EvaluationResponse",
    "RequestBase",
    "RewardRequest",
    "ScoreResponse",
    "api_types",
    "criteria",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "EvaluationResponse": "composo._core.responses",
        "ScoreResponse": "composo._core.responses:InstanceResult",
        "RequestBase": "composo._core.wire",
        "RewardRequest": "composo._core.wire",
        "ChatCompletionMessageParam": "openai.types.chat",
        "api_types": ".api_types",
        "criteria": ".criteria",
    },
)
