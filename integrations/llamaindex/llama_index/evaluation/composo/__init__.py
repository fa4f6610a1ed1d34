"""Composo for LlamaIndex: evaluators, chat-history adapters and agent trace capture.

    from llama_index.evaluation.composo import ComposoFaithfulnessEvaluator

    result = ComposoFaithfulnessEvaluator().evaluate_response(query=q, response=engine.query(q))

Installed, it is also a ``composo`` plugin: ``Composo().evaluate`` takes LlamaIndex chat histories,
responses and tools. Names load on first use, so the plugin module stays cheap to import.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from composo.ext import lazy_exports

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

_FROM = {  # module -> the names it gives
    ".evaluator": "ComposoEvaluator",
    ".evaluators": "ComposoCompletenessEvaluator ComposoFaithfulnessEvaluator "
    "ComposoGoalPursuitEvaluator ComposoPrecisionEvaluator ComposoRelevancyEvaluator "
    "ComposoToolUseEvaluator",
    ".instrument": "LlamaIndexInstrument",
    ".messages": "SOURCE_MATERIAL_HEADER chat_messages source_material_message",
    ".tracing": "LlamaIndexTraceCapture",
}
__getattr__, __dir__ = lazy_exports(
    __name__, {name: m for m, names in _FROM.items() for name in names.split()}
)
