"""Turns validated requests into the platform's response bodies, using one judge."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from composo import criteria as ready_made
from composo._core.responses import summarize
from composo._core.wire import RewardRequest, TraceRequest, check_criterion
from composo.server._cases import agent_case, reward_case
from composo.server.judges import Judge, Verdict

__all__ = ["EvaluationService", "UnknownEvaluatorError"]


class UnknownEvaluatorError(ValueError):
    """``evaluator_name`` names nothing the local server knows."""


def _ready_made() -> dict[str, str]:
    return {
        name: value
        for name in ready_made.__all__
        if isinstance(value := getattr(ready_made, name), str)
    }


class EvaluationService:
    """Reward and trace evaluation with an optional artificial ``latency`` (seconds, awaited)."""

    def __init__(self, judge: Judge, latency: float = 0.0) -> None:
        self.judge = judge
        self.latency = latency
        self._named = _ready_made()

    def criterion(self, request: RewardRequest | TraceRequest) -> str:
        """The criterion text; ``evaluator_name`` may name a ready-made criterion
        (``composo.criteria``) or be a criterion itself."""
        if request.evaluation_criteria is not None:
            return request.evaluation_criteria
        name = request.evaluator_name or ""
        if name in self._named:
            return self._named[name]
        try:
            return check_criterion(name, "evaluator_name")
        except ValueError:
            raise UnknownEvaluatorError(
                f"evaluator_name: {name!r} is not an evaluator this server knows; use one of "
                f"{', '.join(sorted(self._named))} or pass evaluation_criteria instead"
            ) from None

    async def _pause(self) -> None:
        if self.latency:
            await asyncio.sleep(self.latency)

    async def reward(self, request: RewardRequest) -> dict[str, Any]:
        criterion = self.criterion(request)
        await self._pause()
        verdict = await self.judge.judge(reward_case(request, criterion))
        return _reward_body(verdict, request.explanation_cleaning is not None)

    async def trace(self, request: TraceRequest) -> dict[str, Any]:
        """Judge each agent instance; instances without a model call of their own get ``null``."""
        criterion = self.criterion(request)
        await self._pause()
        agents = request.trace.agent_instance_by_id
        names = {aid: a.name for aid, a in agents.items()}
        cases = {aid: agent_case(a, criterion, names) for aid, a in agents.items()}
        judged = [aid for aid, case in cases.items() if case is not None]
        verdicts = await asyncio.gather(*(self.judge.judge(cases[aid]) for aid in judged))  # type: ignore[arg-type]
        by_id: dict[str, Verdict] = dict(zip(judged, verdicts, strict=True))
        results: dict[str, dict[str, Any]] = {}
        for aid, agent in agents.items():
            entry = results.setdefault(
                agent.name, {"agent_name": agent.name, "results_by_agent_instance_id": {}}
            )
            v = by_id.get(aid)
            entry["results_by_agent_instance_id"][aid] = (
                None if v is None else {"score": v.score, "explanation": v.explanation}
            )
        for entry in results.values():
            scores = [
                r["score"]
                for r in entry["results_by_agent_instance_id"].values()
                if r is not None and r["score"] is not None
            ]
            entry["summary_statistics"] = summarize(scores).model_dump()
        return {"request_id": str(uuid.uuid4()), "results_by_agent_name": results}


def _reward_body(verdict: Verdict, cleaned: bool) -> dict[str, Any]:
    body: dict[str, Any] = {"score": verdict.score, "explanation": verdict.explanation}
    if cleaned:
        body["cleaned_explanation"] = verdict.cleaned_explanation or verdict.explanation
    return body
