"""The built-in judges, registered through the same hook as third-party ones. Imports nothing
heavy: each factory imports its judge when called."""

from __future__ import annotations

from collections.abc import Mapping

from composo._core.plugins import hookimpl
from composo.server._config import JudgeOptions
from composo.server.judges import Judge, JudgeFactory


def _heuristic(options: JudgeOptions) -> Judge:
    from composo.server.judges._heuristic import HeuristicJudge

    return HeuristicJudge()


def _openai(options: JudgeOptions) -> Judge:
    from composo.server.judges._openai_judge import OpenAIJudge

    return OpenAIJudge(options)


@hookimpl(trylast=True)
def composo_judges() -> Mapping[str, JudgeFactory]:
    return {"heuristic": _heuristic, "openai": _openai}
