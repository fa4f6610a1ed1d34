"""What the platform answers, and the friendlier fields the reference documents on top of it."""

from __future__ import annotations

import statistics
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, model_validator

from composo._core.provenance import Provenance

REPR_LIMIT = 200  # a result's repr is one console line, never a wall of text


def short(text: object, limit: int) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: max(0, limit - 1)] + "\u2026"


def score_text(score: float | None) -> str:
    return "n/a" if score is None else f"{score:.2f}"


def fitted_repr(name: str, fields: list[tuple[str, object]]) -> str:
    """``name(k=v, ...)`` within :data:`REPR_LIMIT`: the last field (the long text) gives way."""
    head = [f"{k}={v}" for k, v in fields[:-1]]
    key, last = fields[-1]
    fixed = f"{name}({', '.join([*head, f'{key}='])})"
    room = REPR_LIMIT - len(fixed) - 2  # the quotes around the cut text
    while True:  # escapes (quotes, backslashes) can make the quoted text longer than its room
        text = f"{name}({', '.join([*head, f'{key}={short(last, max(room, 1))!r}'])})"
        if len(text) <= REPR_LIMIT or room <= 1:
            return text[:REPR_LIMIT]
        room -= len(text) - REPR_LIMIT


def repr_html(obj: object) -> str | None:
    """A notebook's view of ``obj``, from the plugin that renders one (:mod:`composo._display`);
    ``None`` shows the text ``repr``."""
    from composo._core.plugins import get_plugin_manager

    html: str | None = get_plugin_manager().hook.composo_repr_html(obj=obj)
    return html


class _Model(BaseModel):
    # The platform may add fields; keep them instead of failing on them.
    model_config = ConfigDict(extra="allow", defer_build=True)


class _Judged(_Model):
    """An answer and where it came from, kept beside the answer's fields rather than as one of
    them (``model_dump`` leaves it out; copies and pickles keep it), and not counted for
    equality: an answer from the cache equals the fresh one it was kept from."""

    _provenance: Provenance | None = PrivateAttr(default=None)

    @property
    def provenance(self) -> Provenance | None:
        """The judge, its model and whether the result cache gave this answer; ``None`` for
        one built by hand (``from_dict``, ``model_validate``)."""
        return self._provenance

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, BaseModel):
            return NotImplemented
        return type(other) is type(self) and dict(self) == dict(other)


class _Verdict(_Judged):
    def _repr_html_(self) -> str | None:
        return repr_html(self)


_V = TypeVar("_V", bound=_Judged)


def judged(response: _V, provenance: Provenance | None) -> _V:
    """``response`` with its provenance noted (the client, once per answer)."""
    response._provenance = provenance
    return response


class Source(_Model):
    id: str
    type: str


class EvaluationResponse(_Verdict):
    """One criterion's verdict: ``score`` in [0, 1], or ``None`` when the criterion didn't apply."""

    score: float | None = Field(default=None, ge=0.0, le=1.0)
    explanation: str = ""
    cleaned_explanation: str | None = None
    sources: list[Source] | None = None
    criterion: str | None = None

    @property
    def applicable(self) -> bool:
        return self.score is not None

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EvaluationResponse:
        """A response from its JSON-ready dict (as the platform SDK's ``from_dict``); the same
        as ``EvaluationResponse.model_validate(data)``."""
        return cls.model_validate(data)

    def __repr__(self) -> str:
        fields: list[tuple[str, object]] = [("score", score_text(self.score))]
        if self.criterion is not None:
            fields.append(("criterion", repr(short(self.criterion, 40))))
        return fitted_repr("EvaluationResponse", [*fields, ("explanation", self.explanation)])


def rounded(score: float | None) -> float | None:
    """``score`` as a pass (1.0, from 0.5 up) or a fail (0.0); ``None`` stays ``None``."""
    return None if score is None else (1.0 if score >= 0.5 else 0.0)


class InstanceResult(_Model):
    """One agent instance's verdict in a trace evaluation (the platform SDK's ``ScoreResponse``)."""

    score: float | None = Field(default=None, ge=0.0, le=1.0)
    explanation: str = ""

    def get_rounded(self) -> InstanceResult:
        """A copy with the score rounded to 0 or 1 at 0.5; this result is left as it is."""
        return self.model_copy(update={"score": rounded(self.score)})


class SummaryStatistics(_Model):
    median: float | None = None
    min: float | None = None
    max: float | None = None
    std: float | None = None


class AgentResult(_Model):
    """One agent's part of a trace verdict: each of its instances' results (``None`` where the
    criterion did not apply) and the platform's summary statistics over them."""

    agent_name: str
    results_by_agent_instance_id: dict[str, InstanceResult | None]
    summary_statistics: SummaryStatistics | None = None


class MultiAgentTraceResponse(_Verdict):
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
            results = agent.results_by_agent_instance_id
            for instance_id, res in results.items():
                scores[instance_id] = res.score if res is not None else None
                if res is not None and res.explanation:
                    label = name if len(results) == 1 else f"{name} ({instance_id})"
                    lines.append(f"{label}: {res.explanation}")
        applicable = [s for s in scores.values() if s is not None]
        self.agent_scores = scores
        self.overall_score = statistics.fmean(applicable) if applicable else None
        self.explanation = "\n".join(lines)
        return self

    def __repr__(self) -> str:
        fields: list[tuple[str, object]] = [
            ("overall_score", score_text(self.overall_score)),
            ("agents", len(self.results_by_agent_name)),
        ]
        if self.criterion is not None:
            fields.append(("criterion", repr(short(self.criterion, 40))))
        return fitted_repr("MultiAgentTraceResponse", [*fields, ("explanation", self.explanation)])

    def get_rounded(self) -> MultiAgentTraceResponse:
        """A copy with every instance's score rounded to 0 or 1 at 0.5, and ``agent_scores``,
        ``overall_score`` and ``explanation`` derived again from them (``summary_statistics``
        stay the platform's). This response is left as it is: unlike the platform SDK's, which
        rounds in place and returns the same object, use the returned one."""
        data = self.model_dump()
        for agent in data["results_by_agent_name"].values():
            for result in agent["results_by_agent_instance_id"].values():
                if result is not None:
                    result["score"] = rounded(result["score"])
        return judged(type(self).model_validate(data), self._provenance)


class TaskInfo(_Judged):
    """State of a background evaluation (``GET /api/v1/evals/tasks/{task_id}``, local server);
    its result, once there, has this answer's provenance."""

    task_id: str
    status: Literal["pending", "running", "succeeded", "failed"]
    result: dict[str, Any] | None = None
    error: Any = None
