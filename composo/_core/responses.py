"""What the platform answers, and the friendlier fields the reference documents on top of it."""

from __future__ import annotations

import statistics
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = [
    "AgentResult",
    "EvaluationResponse",
    "InstanceResult",
    "MultiAgentTraceResponse",
    "Source",
    "SummaryStatistics",
    "TaskInfo",
    "summarize",
]


class _Model(BaseModel):
    # The platform may add fields; keep them instead of failing on them.
    model_config = ConfigDict(extra="allow", defer_build=True)


class Source(_Model):
    id: str
    type: str


class EvaluationResponse(_Model):
    """One criterion's verdict: ``score`` in [0, 1], or ``None`` when the criterion didn't apply."""

    score: float | None = Field(default=None, ge=0.0, le=1.0)
    explanation: str = ""
    cleaned_explanation: str | None = None
    sources: list[Source] | None = None
    criterion: str | None = None

    @property
    def applicable(self) -> bool:
        return self.score is not None


class InstanceResult(_Model):
    score: float | None = Field(default=None, ge=0.0, le=1.0)
    explanation: str = ""


class SummaryStatistics(_Model):
    median: float | None = None
    min: float | None = None
    max: float | None = None
    std: float | None = None


class AgentResult(_Model):
    agent_name: str
    results_by_agent_instance_id: dict[str, InstanceResult | None]
    summary_statistics: SummaryStatistics | None = None


def summarize(scores: list[float]) -> SummaryStatistics:
    """Summary statistics as the platform reports them (population std; empty gives nulls)."""
    if not scores:
        return SummaryStatistics()
    return SummaryStatistics(
        median=statistics.median(scores),
        min=min(scores),
        max=max(scores),
        std=statistics.pstdev(scores),
    )


class MultiAgentTraceResponse(_Model):
    """A trace verdict.

    ``results_by_agent_name`` is the platform's full answer. Derived from it:
    ``agent_scores`` maps each agent instance id to its score (``None`` = not applicable),
    ``overall_score`` is the mean of the applicable instance scores (``None`` if none applied),
    ``explanation`` joins each instance's explanation under its agent's name.
    """

    request_id: str | None = None
    results_by_agent_name: dict[str, AgentResult] = Field(default_factory=dict)
    criterion: str | None = None
    agent_scores: dict[str, float | None] = Field(default_factory=dict)
    overall_score: float | None = None
    explanation: str = ""

    @model_validator(mode="after")
    def _derive(self) -> MultiAgentTraceResponse:
        scores: dict[str, float | None] = {}
        lines: list[str] = []
        for name, agent in self.results_by_agent_name.items():
            for instance_id, res in agent.results_by_agent_instance_id.items():
                scores[instance_id] = res.score if res is not None else None
                if res is not None and res.explanation:
                    label = (
                        name
                        if len(agent.results_by_agent_instance_id) == 1
                        else (f"{name} ({instance_id})")
                    )
                    lines.append(f"{label}: {res.explanation}")
        applicable = [s for s in scores.values() if s is not None]
        self.agent_scores = scores
        self.overall_score = statistics.fmean(applicable) if applicable else None
        self.explanation = "\n".join(lines)
        return self

    @property
    def scores_by_agent_name(self) -> dict[str, float | None]:
        """Median applicable score per agent name (several instances of one agent are common)."""
        out: dict[str, float | None] = {}
        for name, agent in self.results_by_agent_name.items():
            vals = [
                r.score
                for r in agent.results_by_agent_instance_id.values()
                if r and r.score is not None
            ]
            out[name] = statistics.median(vals) if vals else None
        return out


class TaskInfo(_Model):
    """State of a background evaluation (``GET /api/v1/evals/tasks/{task_id}``, local server)."""

    task_id: str
    status: Literal["pending", "running", "succeeded", "failed"]
    result: dict[str, Any] | None = None
    error: Any = None
