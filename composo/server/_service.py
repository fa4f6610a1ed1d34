"""Turns validated requests into the platform's response bodies, using one judge."""

from __future__ import annotations

import asyncio
import statistics
import uuid
from collections.abc import Callable
from typing import Any, TypeVar

from composo import criteria as ready_made
from composo._core.wire import RewardRequest, TraceRequest, check_criterion
from composo.server._cases import Case, agent_case, reward_case
from composo.server.judges import Judge, Verdict

# Past this many messages or agents (or four times as many interactions), work leaves the loop.
_INLINE_ITEMS = 64
# Model calls a judge that must await (an LLM) makes at once for one trace.
_JUDGE_CONCURRENCY = 8
_T = TypeVar("_T")


class UnknownEvaluatorError(ValueError):
    """``evaluator_name`` names nothing the local server knows."""


class EvaluationService:
    """Reward and trace evaluation with an optional artificial ``latency`` (seconds, awaited)."""

    def __init__(self, judge: Judge, latency: float = 0.0) -> None:
        self.judge = judge
        self.latency = latency
        named = ((n, getattr(ready_made, n)) for n in ready_made.__all__)
        self._named: dict[str, str] = {n: v for n, v in named if isinstance(v, str)}

    def criterion(self, request: RewardRequest | TraceRequest) -> str:
        """The criterion; ``evaluator_name`` may name one of ``composo.criteria`` or be one."""
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

    async def reward(self, request: RewardRequest) -> dict[str, Any]:
        criterion = self.criterion(request)
        if self.latency:
            await asyncio.sleep(self.latency)
        heavy = len(request.messages) > _INLINE_ITEMS
        case = await _maybe_in_thread(heavy, reward_case, request, criterion)
        verdict = await self.judge.judge(case)
        return _reward_body(verdict, request.explanation_cleaning is not None)

    async def trace(self, request: TraceRequest) -> dict[str, Any]:
        """Judge each agent instance (``null`` without a model call of its own); a large trace is
        prepared, judged (by a ``judge_sync``) and summarised in a worker thread."""
        criterion = self.criterion(request)
        if self.latency:
            await asyncio.sleep(self.latency)
        agents = request.trace.agent_instance_by_id
        heavy = (
            len(agents) > _INLINE_ITEMS
            or sum(len(a.interactions) for a in agents.values()) > 4 * _INLINE_ITEMS
        )
        cases = await _maybe_in_thread(heavy, _trace_cases, request, criterion)
        blocking = getattr(self.judge, "judge_sync", None)
        if heavy and callable(blocking):
            by_id = await asyncio.to_thread(lambda: {aid: blocking(c) for aid, c in cases.items()})
        else:
            slots = asyncio.Semaphore(_JUDGE_CONCURRENCY if heavy else max(1, len(cases)))

            async def one(case: Case) -> Verdict:
                async with slots:
                    return await self.judge.judge(case)

            verdicts = await asyncio.gather(*(one(c) for c in cases.values()))
            by_id = dict(zip(cases, verdicts, strict=True))
        return await _maybe_in_thread(heavy, _trace_body, request, by_id)


async def _maybe_in_thread(heavy: bool, work: Callable[..., _T], *args: Any) -> _T:
    return await asyncio.to_thread(work, *args) if heavy else work(*args)


def _trace_cases(request: TraceRequest, criterion: str) -> dict[str, Case]:
    agents = request.trace.agent_instance_by_id
    names = {aid: a.name for aid, a in agents.items()}
    cases = {aid: agent_case(a, criterion, names) for aid, a in agents.items()}
    return {aid: case for aid, case in cases.items() if case is not None}


def _trace_body(request: TraceRequest, by_id: dict[str, Verdict]) -> dict[str, Any]:
    results: dict[str, dict[str, Any]] = {}
    for aid, agent in request.trace.agent_instance_by_id.items():
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
        entry["summary_statistics"] = _statistics(scores)
    return {"request_id": str(uuid.uuid4()), "results_by_agent_name": results}


def _statistics(scores: list[float]) -> dict[str, float | None]:
    """Summary statistics as the platform reports them (population std; empty gives nulls)."""
    if not scores:
        return {"median": None, "min": None, "max": None, "std": None}
    figures = (statistics.median(scores), min(scores), max(scores), statistics.pstdev(scores))
    return dict(zip(("median", "min", "max", "std"), map(float, figures), strict=True))


def _reward_body(verdict: Verdict, cleaned: bool) -> dict[str, Any]:
    body: dict[str, Any] = {"score": verdict.score, "explanation": verdict.explanation}
    if cleaned:
        body["cleaned_explanation"] = verdict.cleaned_explanation or verdict.explanation
    return body
