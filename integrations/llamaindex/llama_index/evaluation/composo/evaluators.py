"""Ready-made evaluators for Composo's criteria library, named like LlamaIndex's own: each a
``ComposoEvaluator`` with its criteria filled in."""

from __future__ import annotations

from typing import Any, ClassVar

from llama_index.evaluation.composo.evaluator import ComposoEvaluator

from composo import AsyncComposo, Composo, criteria

__all__ = [
    "ComposoCompletenessEvaluator",
    "ComposoFaithfulnessEvaluator",
    "ComposoGoalPursuitEvaluator",
    "ComposoPrecisionEvaluator",
    "ComposoRelevancyEvaluator",
    "ComposoToolUseEvaluator",
]


class _Preset(ComposoEvaluator):
    """A ``ComposoEvaluator`` with its criteria chosen; it takes the same other arguments."""

    CRITERIA: ClassVar[str | list[str]]

    def __init__(
        self,
        client: Composo | AsyncComposo | None = None,
        threshold: float = 0.5,
        **kwargs: Any,
    ) -> None:
        super().__init__(self.CRITERIA, client, threshold, **kwargs)


class ComposoFaithfulnessEvaluator(_Preset):
    """Is every claim in the response supported by the retrieved contexts? (RAG)"""

    CRITERIA = criteria.rag_faithfulness


class ComposoRelevancyEvaluator(_Preset):
    """Does the response address the query with the most relevant contexts? (RAG)"""

    CRITERIA = criteria.rag_relevance


class ComposoCompletenessEvaluator(_Preset):
    """Does the response include everything in the contexts needed to answer? (RAG)"""

    CRITERIA = criteria.rag_completeness


class ComposoPrecisionEvaluator(_Preset):
    """Does the response keep to what the question needs, without extraneous context? (RAG)"""

    CRITERIA = criteria.rag_precision


class ComposoToolUseEvaluator(_Preset):
    """Tool selection, argument formulation and use of results, averaged.

    Give it a conversation with tool calls: ``evaluate(messages=chat_history)``, or
    ``evaluate_response(query, agent_chat_response)``. Without tool calls it is not applicable.
    """

    CRITERIA: ClassVar[str | list[str]] = list(criteria.TOOL_USE)


class ComposoGoalPursuitEvaluator(_Preset):
    """Did the agent stay on the user's goal and complete it?

    Works on a conversation, and best on a whole run: ``evaluate(trace=capture)`` with a
    ``LlamaIndexTraceCapture``.
    """

    CRITERIA = criteria.agent_goal_pursuit
