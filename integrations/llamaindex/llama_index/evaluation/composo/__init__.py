"""Composo for LlamaIndex: evaluators, chat-history adapters and agent trace capture.

    from llama_index.evaluation.composo import ComposoFaithfulnessEvaluator

    result = ComposoFaithfulnessEvaluator().evaluate_response(query=q, response=engine.query(q))

Installing this package also lets ``composo.Composo().evaluate`` take LlamaIndex chat histories,
responses and tools directly (it is a ``composo`` plugin). Names load on first use: the plugin
module lives in this package and must stay cheap to import.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from llama_index.evaluation.composo.evaluator import ComposoEvaluator
    from llama_index.evaluation.composo.evaluators import (
        ComposoCompletenessEvaluator,
        ComposoFaithfulnessEvaluator,
        ComposoGoalPursuitEvaluator,
        ComposoPrecisionEvaluator,
        ComposoRelevancyEvaluator,
        ComposoToolUseEvaluator,
    )
    from llama_index.evaluation.composo.instrument import LlamaIndexInstrument
    from llama_index.evaluation.composo.messages import (
        SOURCE_MATERIAL_HEADER,
        chat_messages,
        source_material_message,
    )
    from llama_index.evaluation.composo.tracing import LlamaIndexTraceCapture

_WHERE = {
    "ComposoEvaluator": "evaluator",
    "ComposoCompletenessEvaluator": "evaluators",
    "ComposoFaithfulnessEvaluator": "evaluators",
    "ComposoGoalPursuitEvaluator": "evaluators",
    "ComposoPrecisionEvaluator": "evaluators",
    "ComposoRelevancyEvaluator": "evaluators",
    "ComposoToolUseEvaluator": "evaluators",
    "LlamaIndexInstrument": "instrument",
    "LlamaIndexTraceCapture": "tracing",
    "SOURCE_MATERIAL_HEADER": "messages",
    "chat_messages": "messages",
    "source_material_message": "messages",
}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_WHERE])


__all__ = [
    "SOURCE_MATERIAL_HEADER",
    "ComposoCompletenessEvaluator",
    "ComposoEvaluator",
    "ComposoFaithfulnessEvaluator",
    "ComposoGoalPursuitEvaluator",
    "ComposoPrecisionEvaluator",
    "ComposoRelevancyEvaluator",
    "ComposoToolUseEvaluator",
    "LlamaIndexInstrument",
    "LlamaIndexTraceCapture",
    "chat_messages",
    "source_material_message",
]
