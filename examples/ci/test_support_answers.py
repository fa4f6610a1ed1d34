"""Quality checks for a support assistant, run as ordinary tests.

Run them against the local server, no account needed::

    pytest examples/ci --composo-local

or against the platform with COMPOSO_API_KEY set. ``--composo-out evals.jsonl`` keeps every
evaluation as result rows for ``composo report`` and ``composo compare``.
"""

from __future__ import annotations

from typing import Any

import pytest

from composo import criteria
from composo.testing import assert_passes, assert_score

POLICY = (
    "Returns: 30 days, unused items, free return label. Refunds reach the card in 5-10 "
    "business days."
)


def support_answer(question: str) -> str:
    """The application under test (here a canned answer; in your project, your LLM app)."""
    if "refund" in question.lower():
        return "Refunds for returned items reach your card within 5-10 business days."
    return "Unused items can be returned within 30 days with the free return label."


def conversation(question: str) -> list[dict[str, Any]]:
    return [
        {"role": "system", "content": POLICY},
        {"role": "user", "content": question},
        {"role": "assistant", "content": support_answer(question)},
    ]


@pytest.mark.parametrize(
    "question",
    [
        "Can I return unused items after 30 days?",
        "How long do refunds for returned items take to reach my card?",
    ],
)
def test_answers_address_the_question(question: str) -> None:
    assert_score(
        conversation(question),
        "Reward answers that address the customer's question about returns and refunds",
        min_score=0.5,
    )


def test_answers_stay_with_the_policy() -> None:
    assert_passes(
        conversation("How long do refunds take?"),
        "Passes if the answer states how long refunds take",
    )


def test_the_fixture_client(composo: Any) -> None:
    # The `composo` fixture is a configured client; its evaluations are recorded too.
    response = composo.evaluate(
        messages=conversation("Can I return unused boots?"),
        criteria="Passes if the answer tells the customer whether unused items can be returned",
    )
    assert_passes(response)


def test_a_library_criterion() -> None:
    assert_score(conversation("How long do refunds take?"), criteria.rag_faithfulness, 0.3)
