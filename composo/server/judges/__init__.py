"""Judges score a :class:`~composo.server._cases.Case` (one shape whatever the request carried).
Any package can add one through the ``composo_judges`` hook: ``{name: factory}``, where
``factory(JudgeOptions)`` builds an object with ``async judge(case) -> Verdict`` and
``async aclose()``; optionally ``judge_sync(case)`` (a large trace's agents are then judged in a
worker thread) and a ``model`` attribute, named on every answer (``x-composo-judge-model``)."""

from __future__ import annotations

import sys
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING

from composo._core.plugins import hookimpl
from composo.server._config import JudgeOptions
from composo.server.judges._verdict import Judge, JudgeError, JudgeFactory, Verdict

if TYPE_CHECKING:
    import pluggy

__all__ = ["Judge", "JudgeError", "JudgeFactory", "Verdict", "make_judge"]

BUILTIN_JUDGES_PLUGIN = "composo.server.judges"
_lock = threading.Lock()


def _make_heuristic(options: JudgeOptions) -> Judge:
    from composo.server.judges._heuristic import HeuristicJudge

    return HeuristicJudge()


def _make_openai(options: JudgeOptions) -> Judge:
    from composo.server.judges._openai_judge import OpenAIJudge

    return OpenAIJudge(options)


@hookimpl(trylast=True)
def composo_judges() -> Mapping[str, JudgeFactory]:
    """The built-in judges, through the same hook as third-party ones."""
    return {"heuristic": _make_heuristic, "openai": _make_openai}


def _plugin_manager() -> pluggy.PluginManager:
    """The manager with the built-in judges (and hookspecs, for a checkout without entry points)."""
    import composo.server.hookspecs  # noqa: F401
    from composo._core.plugins import get_plugin_manager

    pm = get_plugin_manager()
    with _lock:
        if pm.get_plugin(BUILTIN_JUDGES_PLUGIN) is None:
            pm.register(sys.modules[__name__], name=BUILTIN_JUDGES_PLUGIN)
    return pm


def make_judge(name: str, options: JudgeOptions) -> Judge:
    """The judge ``name`` from every judge the plugins offer; they may override built-in names."""
    judges: dict[str, JudgeFactory] = {}
    # Results come last-registered first and built-ins run last: apply in reverse so plugins win.
    for mapping in reversed(_plugin_manager().hook.composo_judges()):
        if isinstance(mapping, Mapping):
            judges.update(mapping)
    if name not in judges:
        raise ValueError(f"judge {name!r} is unknown; available: {', '.join(sorted(judges))}")
    return judges[name](options)
