"""Where a verdict came from: judge, model, fresh or cached. The headers that say so are named
only here: the local server sends them, the result cache replays them on a hit (adding
:data:`CACHE_HEADER`), the client reads them once per answer. The platform sends none."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Literal

JUDGE_HEADER = "x-composo-judge"
"""The judge a server names on every answer (``heuristic``, ``openai``, a plugin's name)."""
JUDGE_MODEL_HEADER = "x-composo-judge-model"
"""The model that judge ran, when it runs one (the OpenAI judge's chat model)."""
JUDGE_HEADERS = (JUDGE_HEADER, JUDGE_MODEL_HEADER)
"""What the result cache keeps with an answer and gives back with it."""
CACHE_HEADER = "x-composo-cache"
"""Set by the result cache on an answer it gave; :data:`CACHE_HIT` is its value."""
CACHE_HIT = "hit"
PLATFORM = "platform"
"""The judge of an answer that names none: the Composo platform."""


@dataclass(frozen=True)
class Provenance:
    """Where a verdict came from.

    Attributes:
        judge: The judge the server named (``"heuristic"``, ``"openai"``, ...), or
            ``"platform"`` for the Composo platform, which names none.
        model: The model that judged: for the platform the model core asked for (``None``: its
            default), else the model the server named (``None``: it named none).
        source: ``"fresh"`` from the judge, or ``"cache"`` from the result cache.
    """

    judge: str = PLATFORM
    model: str | None = None
    source: Literal["fresh", "cache"] = "fresh"

    @property
    def cached(self) -> bool:
        return self.source == "cache"

    def __str__(self) -> str:
        judge = self.judge if self.model is None else f"{self.judge} {self.model}"
        return f"{judge}, from the cache" if self.cached else judge

    @classmethod
    def from_headers(cls, headers: Mapping[str, str]) -> Provenance:
        """What an answer's headers say (looked up by lower-case name, as ``httpx.Headers``)."""
        return cls(
            headers.get(JUDGE_HEADER) or PLATFORM,
            headers.get(JUDGE_MODEL_HEADER) or None,
            "cache" if headers.get(CACHE_HEADER) == CACHE_HIT else "fresh",
        )

    def asked(self, model_core: str | None) -> Provenance:
        """For a platform answer, the model core the request asked for (it names none)."""
        if self.judge != PLATFORM or self.model is not None or model_core is None:
            return self
        return replace(self, model=model_core)
