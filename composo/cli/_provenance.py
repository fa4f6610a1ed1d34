"""Where each score of a run came from, as its row says it: the judge that made it (the platform
and the model core asked for, the local heuristic stand-in, an OpenAI-compatible judge and its
model) and whether it came fresh from the server or from the result cache. The client notes
this on each result as it reads the answer (:attr:`composo.types.EvaluationResponse.provenance`);
rows copy it. Rows an earlier run wrote keep what they said, and the run record counts them as
resumed."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from composo._core.provenance import PLATFORM

if TYPE_CHECKING:
    from composo._core.provenance import Provenance

__all__ = ["PLATFORM", "judge_key", "stamp"]


def stamp(row: dict[str, Any], provenance: Provenance | None) -> dict[str, Any]:
    """``row`` with ``judge``, ``model_core`` (the platform's: the core asked for, ``None`` for
    its default or another judge), ``judge_model`` (the model another judge named, if any) and
    ``source`` (``fresh`` or ``cache``); all ``None`` for a pair not judged."""
    p = provenance
    platform = p is not None and p.judge == PLATFORM
    row["judge"] = p.judge if p is not None else None
    row["model_core"] = p.model if p is not None and platform else None
    row["judge_model"] = p.model if p is not None and not platform else None
    row["source"] = p.source if p is not None else None
    return row


def judge_key(row: Mapping[str, Any]) -> str | None:
    """One name per judge for counting: ``heuristic``, ``platform``, ``platform align-...``."""
    judge = row.get("judge")
    if not isinstance(judge, str) or not judge:
        return None
    core = row.get("model_core")
    return f"{judge} {core}" if judge == PLATFORM and isinstance(core, str) and core else judge
