"""The platform's request contract, defined once: the client and the local server both validate
with these models, and every rule on a field lives here (the client only renames the field in
an error to the argument the caller used)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Literal
from uuid import UUID

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, field_validator, model_validator

# cores.py needs no pydantic: the clients check model_core= before this module loads.
from composo._core.cores import LIGHTNING_MODEL_CORES, ModelCore, check_model_core
from composo._core.limits import (
    MAX_CRITERION_LENGTH,
    MAX_EVALUATOR_NAME_LENGTH,
    MIN_MESSAGES,
    TAG_LIMIT,
)
from composo._core.trace import MultiAgentTrace

DEFAULT_MODEL_CORE = "align-20251111"

# The platform does not check roles; these are the ones a chat conversation has, and the
# client refuses others as a likely mistake.
MESSAGE_ROLES = frozenset({"system", "developer", "user", "assistant", "tool"})
CRITERION_PREFIXES = ("Reward", "Penalize", "Passes if", "Fails if")
BINARY_PREFIXES = ("passes if", "fails if")


# -- the rules, one function each; a ValueError names the field ---------------------------------


def check_criterion(criterion: object, field: str = "criteria") -> str:
    """The criterion stripped, or ``ValueError``. It begins with one of
    :data:`CRITERION_PREFIXES` once its first letter is upper-cased, as the platform reads it."""
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
    if not (text[0].upper() + text[1:]).startswith(CRITERION_PREFIXES):
        from composo import criteria as ready_made  # plain strings, no imports

        if text in ready_made.__all__ and isinstance(getattr(ready_made, text), str):
            raise ValueError(
                f"{field}: {text!r} is the name of a ready-made criterion, not its text; pass "
                f"composo.criteria.{text} (the names are for the command line's -c)"
            )
        raise ValueError(
            f"{field}: {text[:60]!r} must begin with 'Reward', 'Penalize', 'Passes if' or "
            "'Fails if', e.g. 'Reward responses that cite the source'"
        )
    return text


def check_evaluator_name(name: object, field: str = "evaluator_name") -> str:
    """A saved evaluator's name, or ``ValueError``."""
    if not isinstance(name, str) or not name.strip() or len(name) > MAX_EVALUATOR_NAME_LENGTH:
        raise ValueError(f"{field}: expected a name of 1 to {MAX_EVALUATOR_NAME_LENGTH} characters")
    return name


def check_tags(tags: object) -> dict[str, str] | None:
    """Flat string-to-string tags (numbers and booleans become strings), keys and values at most
    :data:`~composo._core.limits.TAG_LIMIT` characters; ``ValueError`` otherwise."""
    if tags is None:
        return None
    if not isinstance(tags, Mapping):
        raise ValueError(
            f"tags: expected a dict of strings, e.g. {{'env': 'prod'}}, got {type(tags).__name__}"
        )
    out: dict[str, str] = {}
    for key, value in tags.items():
        if not isinstance(key, str):
            raise ValueError(f"tags: key {key!r} must be a string")
        if isinstance(value, bool):
            text = "true" if value else "false"
        elif isinstance(value, (str, int, float)):
            text = str(value)
        else:
            raise ValueError(
                f"tags[{key!r}]: values must be strings (or numbers/booleans), "
                f"got {type(value).__name__}; flatten nested values into their own keys"
            )
        if len(key) > TAG_LIMIT or len(text) > TAG_LIMIT:
            raise ValueError(
                f"tags[{key[:20]!r}]: keys and values are at most {TAG_LIMIT} characters"
            )
        out[key] = text
    return out


def check_trace_options(options: Mapping[str, Any]) -> None:
    """``ValueError`` for what a trace cannot take: ``explanation_cleaning``,
    ``evaluate_latest=True``, a lightning core."""
    if options.get("explanation_cleaning") is not None:
        raise ValueError(
            "explanation_cleaning: only reward evaluations take it; a trace evaluation "
            "refuses it, so drop it"
        )
    if options.get("evaluate_latest"):
        raise ValueError("evaluate_latest must be false for traces")
    core = options.get("model_core")
    if core in LIGHTNING_MODEL_CORES:
        raise ValueError(
            f"model_core {core!r} cannot evaluate traces; use a non-lightning core such as "
            f"{DEFAULT_MODEL_CORE!r}"
        )


def is_binary(criterion: str) -> bool:
    """``Passes if`` / ``Fails if`` criteria score 0 or 1."""
    return criterion.lstrip().lower().startswith(BINARY_PREFIXES)


# -- the models ---------------------------------------------------------------------------------


class RequestOptions(BaseModel):
    """The options both endpoints take; unknown fields are refused, as the platform does."""

    model_config = ConfigDict(
        extra="forbid", frozen=True, defer_build=True, protected_namespaces=()
    )

    model_core: ModelCore | None = None
    evaluate_latest: bool | None = None
    tags: dict[str, str] | None = None
    data_retention: Literal["standard", "none"] | None = None
    trace_id: UUID | None = None

    @field_validator("model_core", mode="before")
    @classmethod
    def _known_core(cls, v: object) -> object:
        return check_model_core(v)

    @field_validator("tags", mode="before")
    @classmethod
    def _flat_tags(cls, v: object) -> object:
        return check_tags(v)


class RequestBase(RequestOptions):
    """What both requests have: the options and one criterion (text or a saved evaluator)."""

    # Which endpoint the request is for, read by the clients without importing this module.
    is_trace: ClassVar[bool] = False
    evaluation_criteria: str | None = None
    evaluator_name: str | None = None

    @field_validator("evaluation_criteria", mode="before")
    @classmethod
    def _valid_criterion(cls, v: object) -> object:
        return None if v is None else check_criterion(v, "evaluation_criteria")

    @field_validator("evaluator_name", mode="before")
    @classmethod
    def _valid_name(cls, v: object) -> object:
        return None if v is None else check_evaluator_name(v)

    @model_validator(mode="after")
    def _one_criterion_source(self) -> RequestBase:
        if (self.evaluation_criteria is None) == (self.evaluator_name is None):
            raise ValueError(
                "give exactly one of evaluation_criteria (a criterion string) or evaluator_name"
            )
        return self

    def wire(self) -> dict[str, Any]:
        """The JSON body: only the fields that are set."""
        return self.model_dump(mode="json", exclude_none=True)


class RewardRequest(RequestBase):
    """Body of ``POST /api/v1/evals/reward``; ``system_message`` is read as ``system``."""

    messages: Annotated[list[dict[str, Any]], Field(min_length=MIN_MESSAGES)]
    system: str | None = Field(
        default=None, validation_alias=AliasChoices("system", "system_message")
    )
    tools: list[dict[str, Any]] | None = None
    explanation_cleaning: Literal["end_user"] | None = None

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


class TraceRequest(RequestBase):
    """Body of ``POST /api/v1/evals/trace``."""

    is_trace: ClassVar[bool] = True
    trace: MultiAgentTrace

    @model_validator(mode="before")
    @classmethod
    def _no_cleaning(cls, data: Any) -> Any:
        if isinstance(data, Mapping):
            check_trace_options({"explanation_cleaning": data.get("explanation_cleaning")})
        return data

    @model_validator(mode="after")
    def _trace_rules(self) -> TraceRequest:
        check_trace_options(
            {"evaluate_latest": self.evaluate_latest, "model_core": self.model_core}
        )
        return self
