"""Judges score a :class:`~composo.server._cases.Case` (one shape whatever the request carried).
Any package can add one through the ``composo_judges`` hook: ``{name: factory}``, where
``factory(JudgeOptions)`` builds an object with ``async judge(case) -> Verdict`` and
``async aclose()``; optionally ``judge_sync(case)`` (a large trace's agents are then judged in a
worker thread) and a ``model`` attribute, named on every answer (``x-composo-judge-model``)."""

from __future__ import annotations

import sys
import threading
from collections.abc import Mapping

from composo._core.plugins import get_plugin_manager, hookimpl
from composo.server._config import JudgeOptions
from composo.server.judges._verdict import Judge, JudgeError, JudgeFactory, Verdict

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


def make_judge(name: str, options: JudgeOptions) -> Judge:
    """The judge ``name`` from every judge the plugins offer; they may override built-in names."""
    import composo.server.hookspecs  # noqa: F401  (declared for a checkout without entry points)

    pm = get_plugin_manager()
    with _lock:
        if pm.get_plugin(BUILTIN_JUDGES_PLUGIN) is None:
            pm.register(sys.modules[__name__], name=BUILTIN_JUDGES_PLUGIN)
    judges: dict[str, JudgeFactory] = {}
    # Results come last-registered first and built-ins run last: apply in reverse so plugins win.
    for mapping in reversed(pm.hook.composo_judges()):
        if isinstance(mapping, Mapping):
            judges.update(mapping)
    if name not in judges:
        raise ValueError(f"judge {name!r} is unknown; available: {', '.join(sorted(judges))}")
    return judges[name](options)
