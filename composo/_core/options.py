"""The evaluate options, defined once: every evaluate method, the batch plan and the command line
read :data:`OPTION_NAMES`. Adding one is a line here, its wire field (:mod:`composo._core.wire`)
and a keyword of ``evaluate`` and ``evaluate_trace``, which name every option in the platform
SDK's order (``tests/test_options.py`` checks it)."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Collection, Mapping
from typing import Any, Literal, ParamSpec, TypedDict, TypeVar

from composo.errors import UnknownArgumentError

P = ParamSpec("P")
R = TypeVar("R")

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
            raise unknown_argument(where, name, OPTION_NAMES, "the options are")


def unknown_argument(
    where: str, name: str, accepted: Collection[str], listed: str = "it takes"
) -> UnknownArgumentError:
    """Python's unknown-keyword ``TypeError``, with the closest accepted name and the list."""
    import difflib

    close = difflib.get_close_matches(name, accepted, n=1, cutoff=0.6)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return UnknownArgumentError(
        f"{where}() got an unexpected keyword argument {name!r}{hint}; {listed} "
        + ", ".join(accepted)
    )


def keywords_checked(fn: Callable[P, R]) -> Callable[P, R]:
    """``fn`` refusing an unknown keyword with :func:`unknown_argument`; the signature is bound
    only after a ``TypeError``, so a good call pays one frame."""
    accepted = [n for n in inspect.signature(fn).parameters if n != "self"]

    @functools.wraps(fn)
    def call(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except TypeError:
            try:
                inspect.signature(fn).bind(*args, **kwargs)
            except TypeError:
                unknown = [k for k in kwargs if k not in accepted]
                if unknown:
                    raise unknown_argument(fn.__name__, unknown[0], accepted) from None
            raise

    return call


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
