"""Judges score a :class:`~composo.server._cases.Case`. They are plugins: any package can add one
through the ``composo_judges`` hook, returning ``{name: factory}`` where ``factory(options)``
(options: :class:`~composo.server._config.JudgeOptions`) builds an object with
``async judge(case) -> Verdict`` and ``async aclose()``. A judge whose work is computation
rather than waiting may also offer ``judge_sync(case) -> Verdict``: the server then judges a
large trace's agents with it in a worker thread, off the event loop. A judge that runs a model
names it in a ``model`` attribute (a string), which every answer then carries beside the judge's
name (``x-composo-judge-model``), so scores say which model made them.

Judges are given cases in one shape whatever the request carried (see
:func:`~composo.server._cases.reward_case`), so they never meet a shape they cannot read.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

from composo.server._cases import Case
from composo.server._config import JudgeOptions

__all__ = ["Judge", "JudgeError", "JudgeFactory", "Verdict", "available_judges", "make_judge"]

BUILTIN_JUDGES_PLUGIN = "composo.server.judges"


@dataclass(frozen=True)
class Verdict:
    """A score in [0, 1] (``None``: the criterion does not apply) and why; the cleaned
    explanation is the one meant for end users (``explanation_cleaning="end_user"``)."""

    score: float | None
    explanation: str
    cleaned_explanation: str | None = None

    def __post_init__(self) -> None:
        if self.score is not None and not 0.0 <= self.score <= 1.0:
            raise ValueError(f"score must be in [0, 1] or None, got {self.score}")


class JudgeError(Exception):
    """The judge could not reach a verdict (its model failed or answered nonsense)."""


class Judge(Protocol):
    name: str

    async def judge(self, case: Case) -> Verdict: ...

    async def aclose(self) -> None: ...


JudgeFactory = Callable[[JudgeOptions], Judge]


def available_judges() -> dict[str, JudgeFactory]:
    """Every judge known to the plugin manager; plugins may override the built-in names."""
    from composo._core.plugins import get_plugin_manager
    from composo.server.judges import _builtin as builtin

    pm = get_plugin_manager()
    if not pm.is_registered(builtin):
        pm.register(builtin, name=BUILTIN_JUDGES_PLUGIN)
    found: dict[str, JudgeFactory] = {}
    # Results come last-registered first and built-ins run last: apply in reverse so plugins win.
    for mapping in reversed(pm.hook.composo_judges()):
        if isinstance(mapping, Mapping):
            found.update(mapping)
    return found


def make_judge(name: str, options: JudgeOptions) -> Judge:
    judges = available_judges()
    if name not in judges:
        raise ValueError(f"judge {name!r} is unknown; available: {', '.join(sorted(judges))}")
    return judges[name](options)
