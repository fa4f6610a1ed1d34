"""Evaluations as tests: assertions that fail with the criterion, the score, the threshold and the
judge's explanation.

In a pytest session the ``composo`` plugin (installed with the package) supplies the client these
use, records every evaluation for its end-of-session summary and ``--composo-out``, and takes the
default threshold from ``--composo-min-score``. Outside pytest they evaluate with a client made
from ``COMPOSO_API_KEY`` / ``COMPOSO_BASE_URL``, or the ``client=`` given.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

from composo._client import Composo
from composo._core.plan import BatchResult
from composo._core.responses import EvaluationResponse, MultiAgentTraceResponse
from composo._core.trace import MultiAgentTrace
from composo._core.wire import is_binary
from composo._testing_session import Outcome, active, outcome

__all__ = ["DEFAULT_MIN_SCORE", "assert_passes", "assert_score"]

DEFAULT_MIN_SCORE = 0.5
"""The threshold when neither ``min_score=`` nor ``--composo-min-score`` gives one."""

_RESULTS = (EvaluationResponse, MultiAgentTraceResponse, BatchResult)


def assert_score(
    subject: Any = None,
    criteria: str | Sequence[str] | None = None,
    min_score: float | None = None,
    *,
    client: Composo | None = None,
    not_applicable_ok: bool = False,
    **evaluate_options: Any,
) -> list[Any]:
    """Evaluate and assert that every criterion scores at least ``min_score``.

    Args:
        subject: The conversation to evaluate (messages, or any object a plugin converts; a
            ``MultiAgentTrace`` is evaluated as a trace), or results already obtained: an
            ``EvaluationResponse``, ``MultiAgentTraceResponse`` or ``BatchResult``, or a list of
            them. ``None`` when the conversation is given as ``input=``/``result=`` or ``trace=``.
        criteria: One criterion or several; needed unless ``subject`` holds results.
        min_score: The lowest passing score, 0 to 1 (default: ``--composo-min-score``, else 0.5).
        client: The client to evaluate with (default: the pytest session's, else one from the
            environment).
        not_applicable_ok: Accept a criterion that did not apply (a null score).
        **evaluate_options: Passed to ``evaluate()`` (``result=``, ``system=``, ``tools=``...) or
            ``evaluate_trace()`` (``trace=``).

    Returns:
        The responses (or the results given), in criteria order.

    Raises:
        AssertionError: A criterion scored below the threshold, did not apply or failed; the
            message shows each one's criterion, score, threshold and explanation.
        ValueError: A bad threshold or missing criteria, before any request.
    """
    __tracebackhide__ = True  # pytest shows the test's line, not this function's
    threshold = _threshold(min_score)
    responses, outcomes = _obtain(subject, criteria, client, evaluate_options, "assert_score")
    failed = _failures(outcomes, threshold, not_applicable_ok, binary=False)
    if failed:
        raise AssertionError(
            f"composo: {len(failed)} of {len(outcomes)} criteria below the threshold "
            f"{threshold:g}\n" + "\n".join(failed)
        )
    return responses


def assert_passes(
    subject: Any = None,
    criteria: str | Sequence[str] | None = None,
    *,
    client: Composo | None = None,
    not_applicable_ok: bool = False,
    **evaluate_options: Any,
) -> list[Any]:
    """Evaluate binary criteria (``Passes if ...`` / ``Fails if ...``) and assert every one passes.

    Args:
        subject: As for :func:`assert_score`: messages, a trace, or results already obtained.
        criteria: Binary criteria; needed unless ``subject`` holds results.
        client: The client to evaluate with (default: the pytest session's, else one from the
            environment).
        not_applicable_ok: Accept a criterion that did not apply (a null score).
        **evaluate_options: Passed to ``evaluate()`` or ``evaluate_trace()``.

    Returns:
        The responses (or the results given), in criteria order.

    Raises:
        AssertionError: A criterion failed (scored 0), did not apply or could not be evaluated;
            the message shows each one's criterion, score and explanation.
        ValueError: A criterion that is not binary, before any request.
    """
    __tracebackhide__ = True
    for c in _criteria_list(criteria):
        if not is_binary(c):
            raise ValueError(
                f"assert_passes: {c[:80]!r} is not a binary criterion ('Passes if ...' or "
                "'Fails if ...'); use assert_score(..., min_score=...) for a scored criterion"
            )
    responses, outcomes = _obtain(subject, criteria, client, evaluate_options, "assert_passes")
    for o in outcomes:
        if o.error is None and o.score is not None and not is_binary(o.criterion):
            raise ValueError(
                f"assert_passes: {o.criterion[:80]!r} is not a binary criterion; use "
                "assert_score for a scored criterion"
            )
    failed = _failures(outcomes, 0.5, not_applicable_ok, binary=True)
    if failed:
        raise AssertionError(
            f"composo: {len(failed)} of {len(outcomes)} binary criteria did not pass\n"
            + "\n".join(failed)
        )
    return responses


# -- machinery -------------------------------------------------------------------------------


def _threshold(min_score: float | None) -> float:
    session = active()
    if min_score is None:
        min_score = session.min_score if session is not None else None
    if min_score is None:
        return DEFAULT_MIN_SCORE
    if (
        isinstance(min_score, bool)
        or not isinstance(min_score, (int, float))
        or not 0 <= min_score <= 1
    ):
        raise ValueError(f"min_score: must be a number from 0 to 1, got {min_score!r}")
    return float(min_score)


def _criteria_list(criteria: str | Sequence[str] | None) -> list[str]:
    return [criteria] if isinstance(criteria, str) else list(criteria or [])


def _is_results(subject: Any) -> bool:
    items = subject if isinstance(subject, (list, tuple)) else [subject]
    return bool(items) and all(isinstance(x, _RESULTS) for x in items)


def _obtain(
    subject: Any,
    criteria: str | Sequence[str] | None,
    client: Composo | None,
    options: dict[str, Any],
    caller: str,
) -> tuple[list[Any], list[Outcome]]:
    names = _criteria_list(criteria)
    session = active()
    if _is_results(subject):
        given = list(subject) if isinstance(subject, (list, tuple)) else [subject]
        if session is not None:
            session.recorder.response(given)
        return given, _outcomes(given, names)
    if not names:
        raise ValueError(
            f"{caller}: criteria is required when evaluating (or pass the responses to check)"
        )
    if client is None and session is not None:
        client = session.client()
    # a client made here is closed here; one given (or the session's) stays open
    with Composo() if client is None else contextlib.nullcontext(client) as c:
        if "trace" in options or isinstance(subject, MultiAgentTrace):
            trace = options.pop("trace", subject)
            out = c.evaluate_trace(trace, criteria=names, **options)
        elif subject is not None:
            out = c.evaluate(messages=subject, criteria=names, **options)
        else:
            out = c.evaluate(criteria=names, **options)
        responses = list(out) if isinstance(out, list) else [out]  # one criterion: one answer
        if session is not None:
            session.recorder.response(responses)
    return responses, _outcomes(responses, names)


def _outcomes(results: list[Any], names: list[str]) -> list[Outcome]:
    found = [outcome(r, names[i] if i < len(names) else None) for i, r in enumerate(results)]
    if None in found:  # a task handle (block=False): there is no verdict to check
        raise TypeError(f"composo: not an evaluation result: {results[found.index(None)]!r:.80}")
    return [o for o in found if o is not None]


def _failures(
    outcomes: list[Outcome], threshold: float, not_applicable_ok: bool, binary: bool
) -> list[str]:
    """Each outcome's assertion recorded in the session; the failed ones described."""
    session = active()
    failed = []
    for o in outcomes:
        ok = o.error is None and (
            (o.score is None and not_applicable_ok)
            or (o.score is not None and o.score >= threshold)
        )
        if session is not None:
            session.recorder.check(o.criterion, ok)
        if not ok:
            failed.append(_describe(o, 1.0 if binary else threshold, binary))
    return failed


def _describe(o: Outcome, threshold: float, binary: bool) -> str:
    lines = [f"  criterion:   {o.criterion}"]
    if o.error is not None:
        lines.append(f"  error:       {o.error}")
        return "\n".join(lines)
    if o.score is None:
        lines.append("  score:       not applicable (pass not_applicable_ok=True to accept)")
    elif binary:
        lines.append(f"  score:       {o.score:g} (fails; a pass scores 1)")
    else:
        lines.append(
            f"  score:       {o.score:.3f}, below the threshold {threshold:g} by "
            f"{threshold - o.score:.3f}"
        )
    lines.append(f"  explanation: {o.explanation or '(none given)'}")
    return "\n".join(lines)
