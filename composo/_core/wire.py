"""The platform's request contract, defined once: client and local server both validate with it."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from composo._core.trace import MultiAgentTrace

__all__ = [
    "BINARY_PREFIXES",
    "DEFAULT_MODEL_CORE",
    "LIGHTNING_MODEL_CORES",
    "MAX_CRITERION_LENGTH",
    "MESSAGE_ROLES",
    "MODEL_CORES",
    "ModelCore",
    "RewardRequest",
    "TraceRequest",
    "check_criterion",
    "is_binary",
]

ModelCore = Literal[
    "align-20251111",
    "align-20250529",
    "align-20260109",
    "align-lightning-20251127",
    "align-lightning-20250731",
]
MODEL_CORES: tuple[str, ...] = ModelCore.__args__  # type: ignore[attr-defined]
DEFAULT_MODEL_CORE = "align-20251111"
LIGHTNING_MODEL_CORES = frozenset(c for c in MODEL_CORES if "lightning" in c)

MAX_CRITERION_LENGTH = 4096
MESSAGE_ROLES = frozenset({"system", "user", "assistant", "tool"})
BINARY_PREFIXES = ("passes if", "fails if")
_PREFIX = re.compile(r"^(?:[Rr]eward|[Pp]enalize|[Pp]asses if|[Ff]ails if)\b")
_TAG_LIMIT = 64


def check_criterion(criterion: object, field: str = "criteria") -> str:
    """Return the criterion stripped, or raise ``ValueError`` saying what a valid one looks like."""
    if not isinstance(criterion, str):
        raise ValueError(f"{field}: expected a string, got {type(criterion).__name__}")
    text = criterion.strip()
    if not text:
        raise ValueError(f"{field}: a criterion cannot be blank")
    if len(text) > MAX_CRITERION_LENGTH:
        raise ValueError(
            f"{field}: a criterion is at most {MAX_CRITERION_LENGTH} characters "
            f"(this one has {len(text)}); shorten it"
        )
    if not _PREFIX.match(text):
        raise ValueError(
            f"{field}: {text[:60]!r} must begin with 'Reward', 'Penalize', 'Passes if' or "
            "'Fails if', e.g. 'Reward responses that cite the source'"
        )
    return text


def is_binary(criterion: str) -> bool:
    """``Passes if`` / ``Fails if`` criteria score 0 or 1."""
    return criterion.lstrip().lower().startswith(BINARY_PREFIXES)


Tags = dict[
    Annotated[str, Field(max_length=_TAG_LIMIT)], Annotated[str, Field(max_length=_TAG_LIMIT)]
]


class _Request(BaseModel):
    """Fields shared by both endpoints; unknown fields are refused, as the platform does."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    evaluation_criteria: str | None = None
    evaluator_name: Annotated[str, Field(min_length=1, max_length=255)] | None = None
    model_core: ModelCore | None = None
    evaluate_latest: bool | None = None
    tags: Tags | None = None
    explanation_cleaning: Literal["end_user"] | None = None
    data_retention: Literal["standard", "none"] | None = None

    @field_validator("evaluation_criteria")
    @classmethod
    def _valid_criterion(cls, v: str | None) -> str | None:
        return None if v is None else check_criterion(v, "evaluation_criteria")

    @model_validator(mode="after")
    def _one_criterion_source(self) -> _Request:
        if (self.evaluation_criteria is None) == (self.evaluator_name is None):
            raise ValueError(
                "give exactly one of evaluation_criteria (a criterion string) or evaluator_name"
            )
        return self

    def wire(self) -> dict[str, Any]:
        """The JSON body: only the fields that are set."""
        return self.model_dump(mode="json", exclude_none=True)


class RewardRequest(_Request):
    """Body of ``POST /api/v1/evals/reward``."""

    messages: Annotated[list[dict[str, Any]], Field(min_length=2)]
    system: str | None = None
    tools: list[dict[str, Any]] | None = None
    trace_id: UUID | None = None

    @field_validator("messages")
    @classmethod
    def _known_roles(cls, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        for i, m in enumerate(messages):
            role = m.get("role")
            if role not in MESSAGE_ROLES:
                raise ValueError(
                    f"messages[{i}].role is {role!r}; use one of {', '.join(sorted(MESSAGE_ROLES))}"
                )
        return messages

    @model_validator(mode="after")
    def _lightning_rules(self) -> RewardRequest:
        if self.model_core in LIGHTNING_MODEL_CORES:
            if self.evaluate_latest is False:
                raise ValueError(
                    f"model_core {self.model_core!r} only evaluates the latest response; "
                    "drop evaluate_latest=False or choose a non-lightning core"
                )
            if self.evaluation_criteria is not None and not is_binary(self.evaluation_criteria):
                raise ValueError(
                    f"model_core {self.model_core!r} takes only binary criteria "
                    "('Passes if ...' / 'Fails if ...'); choose another core for reward criteria"
                )
        return self


class TraceRequest(_Request):
    """Body of ``POST /api/v1/evals/trace``."""

    trace: MultiAgentTrace

    @model_validator(mode="after")
    def _trace_rules(self) -> TraceRequest:
        if self.evaluate_latest:
            raise ValueError("evaluate_latest must be false for traces")
        if self.model_core in LIGHTNING_MODEL_CORES:
            raise ValueError(
                f"model_core {self.model_core!r} cannot evaluate traces; "
                "use a non-lightning core such as 'align-20251111'"
            )
        return self
