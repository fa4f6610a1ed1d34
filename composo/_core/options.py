"""The evaluate options, defined once.

:class:`EvaluateOptions` is what ``evaluate``, ``evaluate_trace``, ``evaluate_many`` and
``evaluate_many_iter`` (of both clients), the batch plan, the command line and the background
evaluator accept. Adding an option is one line here plus the wire field that carries it
(:mod:`composo._core.wire`) and a keyword-only parameter of ``evaluate`` and ``evaluate_trace``,
typed with the alias below (those two name every option in their signatures, in the platform
SDK's positional order; ``tests/test_options.py`` checks that they carry every option with
this type); everything else reads :data:`OPTION_NAMES`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, TypedDict

__all__ = [
    "OPTION_NAMES",
    "DataRetention",
    "EvaluateOptions",
    "ExplanationCleaning",
    "Tags",
    "check_names",
    "merge",
    "set_options",
]

# The options' types, for the signatures that name them one by one.
Tags = Mapping[str, Any]
ExplanationCleaning = Literal["end_user"]
DataRetention = Literal["standard", "none"]


class EvaluateOptions(TypedDict, total=False):
    """Options for one evaluation, all optional (``None`` means "the platform's default").

    Attributes:
        model_core: The evaluation model, one of ``composo.MODEL_CORES`` (default: the client's
            ``model_core``, else the platform's).
        tags: Flat ``{str: str}`` labels stored with the evaluation (numbers and booleans are
            sent as strings; keys and values at most 64 characters). In a batch, an item's own
            ``tags`` are merged over these.
        evaluate_latest: Score only the last assistant turn (``True``) or the whole conversation.
            Must not be true for traces.
        explanation_cleaning: ``"end_user"`` adds an explanation fit to show end users (reward
            evaluations only; a trace evaluation refuses it).
        data_retention: ``"standard"`` or ``"none"`` (nothing kept after answering).
    """

    model_core: str | None
    tags: Tags | None
    evaluate_latest: bool | None
    explanation_cleaning: ExplanationCleaning | None
    data_retention: DataRetention | None


OPTION_NAMES: tuple[str, ...] = tuple(EvaluateOptions.__annotations__)


def check_names(options: Mapping[str, Any], where: str) -> None:
    """Refuse a misspelled option as Python refuses an unknown keyword (a ``TypeError``)."""
    for name in options:
        if name not in EvaluateOptions.__annotations__:
            raise TypeError(
                f"{where}() got an unexpected keyword argument {name!r}; the options are "
                + ", ".join(OPTION_NAMES)
            )


def set_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """Only the options that are set: ``None`` means "not given", so it is not sent."""
    return {k: v for k, v in options.items() if v is not None}


def merge(base: Mapping[str, Any], own: Mapping[str, Any]) -> dict[str, Any]:
    """``own`` (an item's options) over ``base`` (the run's); tags are merged key by key."""
    out = {**base, **set_options(own)}
    base_tags, own_tags = base.get("tags"), own.get("tags")
    if base_tags is not None and isinstance(own_tags, Mapping):
        out["tags"] = {**base_tags, **own_tags}
    return out
