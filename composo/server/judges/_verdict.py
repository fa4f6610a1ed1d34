"""What every judge gives and is, apart so that the judges need not import their package."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from composo.server._cases import Case
from composo.server._config import JudgeOptions


@dataclass(frozen=True)
class Verdict:
    """A score in [0, 1] (``None``: the criterion does not apply) and why; the cleaned
    explanation is the one meant for end users (``explanation_cleaning="end_user"``)."""

    score: float | None
    explanation: str
    cleaned_explanation: str | None = None

    def __post_init__(self) -> None:
        if self.score is not None and not 0.0 <= self.score <= 1.0:
            raise ValueError(f"score must be in [0, 1] or None, got {self.score}")


class JudgeError(Exception):
    """The judge could not reach a verdict (its model failed or answered nonsense)."""


class Judge(Protocol):
    name: str

    async def judge(self, case: Case) -> Verdict: ...

    async def aclose(self) -> None: ...


JudgeFactory = Callable[[JudgeOptions], Judge]
