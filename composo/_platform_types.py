"""The platform's account and history API, as its published reference shapes it: responses keep
fields the platform adds later, requests refuse unknown ones. The local server answers with these.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

USAGE_PATH = "/api/v1/usage"
EVALUATIONS_FILTER_PATH = "/api/v1/evaluations/filter"
TRACES_PATH = "/api/v1/traces"
TRACES_MAX_PAGE_SIZE = 500  # the reference's range for ``page_size`` is 1..500
TRACES_DEFAULT_PAGE_SIZE = 50

EndpointType = Literal["reward", "trace"]


class _Response(BaseModel):
    model_config = ConfigDict(extra="allow", protected_namespaces=())


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid", protected_namespaces=())


# -- usage ---------------------------------------------------------------------------------------


class UsageCounts(_Response):
    """This month's counts. ``models`` maps a model to its own counts (the reference leaves its
    inner shape open, so it is kept as sent); ``monthly_token_quota`` is ``None`` without one."""

    monthly_token_quota: int | None = None
    models: dict[str, Any] = Field(default_factory=dict)
    total_current_request_count: int = 0
    total_current_token_count: int = 0


class Usage(_Response):
    """``GET /api/v1/usage``."""

    usage: UsageCounts
    quota_reset_date: str | None = None


# -- evaluation history --------------------------------------------------------------------------


class TagFilter(_Request):
    """Evaluations whose tag ``key`` has one of ``values``."""

    key: str = Field(min_length=1)
    values: list[str] = Field(min_length=1)


class CriteriaFilter(_Request):
    """Evaluations made against one of these criteria."""

    values: list[str] = Field(min_length=1)


class EvaluationFilterRequest(_Request):
    """The body of ``POST /api/v1/evaluations/filter``; every filter given must match."""

    filters: list[TagFilter] | None = None
    criteria_filter: CriteriaFilter | None = None
    endpoint_type: EndpointType | None = None
    page: int | None = Field(default=None, ge=1)
    page_size: int | None = Field(default=None, ge=1)


class EvaluationRecord(_Response):
    """One past evaluation as the platform logged it: the request and response it carried,
    with ``criterion`` and ``score`` read from them for convenience."""

    id: str
    endpoint: str | None = None
    status_code: int | None = None
    latency_ms: float | None = None
    request_payload: dict[str, Any] | None = None
    response_payload: dict[str, Any] | None = None
    token_count: int | None = None
    created_at: datetime
    model_class: str | None = None
    tags: dict[str, str] = Field(default_factory=dict)
    email: str | None = None
    domain: str | None = None

    @property
    def criterion(self) -> str | None:
        """The criterion (or evaluator name) the request named; ``None`` when not retained."""
        req = self.request_payload or {}
        value = req.get("evaluation_criteria") or req.get("evaluator_name")
        return value if isinstance(value, str) else None

    @property
    def score(self) -> float | None:
        """A reward answer's score, or the mean of a trace answer's agent scores."""
        resp = self.response_payload or {}
        if isinstance(resp.get("score"), int | float):
            return float(resp["score"])
        scores = [
            r["score"]
            for agent in (resp.get("results_by_agent_name") or {}).values()
            if isinstance(agent, dict)
            for r in (agent.get("results_by_agent_instance_id") or {}).values()
            if isinstance(r, dict) and isinstance(r.get("score"), int | float)
        ]
        return sum(scores) / len(scores) if scores else None

    @property
    def model_core(self) -> str | None:
        """The model core asked for, else the model class the platform reports."""
        core = (self.request_payload or {}).get("model_core")
        return core if isinstance(core, str) else self.model_class


class EvaluationPage(_Response):
    """One page of ``POST /api/v1/evaluations/filter``."""

    evaluations: list[EvaluationRecord]
    total: int
    page: int
    page_size: int
    total_pages: int


# -- traces --------------------------------------------------------------------------------------


class TraceComment(_Response):
    id: str
    trace_id: str
    comment: str
    created_at: datetime


class TraceEvaluation(_Response):
    """One evaluation recorded against a trace; ``sub_trace`` is the part it judged."""

    id: str
    evaluator_name: str | None = None
    score: float | None = None
    explanation: str | None = None
    sub_trace: dict[str, Any] | None = None
    criteria: str | None = None
    sources: list[dict[str, Any]] | None = None
    cached: bool | None = None
    c_cached_tokens: int | None = None


class TraceRecord(_Response):
    """``GET /api/v1/traces/{trace_id}``, and each item of a trace listing."""

    id: str
    created_at: datetime
    tags: dict[str, str] = Field(default_factory=dict)
    rating: bool | None = None
    trace: dict[str, Any] = Field(default_factory=dict)
    comments: list[TraceComment] = Field(default_factory=list)
    evaluations: list[TraceEvaluation] = Field(default_factory=list)


class TracePage(_Response):
    """One page of ``GET /api/v1/traces``; ``next_page_token`` is ``None`` on the last."""

    traces: list[TraceRecord]
    next_page_token: str | None = None
