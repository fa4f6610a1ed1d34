"""Where each score of a run came from: the judge that made it (the platform and the model core
asked for, the local heuristic stand-in, an OpenAI-compatible judge) and whether it came fresh
from the server or from the result cache. Rows an earlier run wrote keep what they said, and the
run record counts them as resumed.

The run's client reads answers through :class:`Provenance`, which notes on each evaluation's
answer the judge its server named (``x-composo-judge``; none: the platform) and whether the
cache gave it (``x-composo-cache``); the mark travels to the result as a field of the response
model, so every row is stamped with its own answer's provenance, whatever order results arrive
in."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import httpx

from composo._cache import EVALUATION_PATHS, HIT_HEADER, decoded, read_whole

__all__ = ["MARK", "PLATFORM", "Provenance", "judge_key", "stamp"]

MARK = "composo_provenance"
"""The field of an answer that carries its provenance to the result (the CLI's own)."""
PLATFORM = "platform"
_JUDGE_HEADER = "x-composo-judge"


class Provenance(httpx.BaseTransport):
    """Marks each successful evaluation answer with its judge and where it came from."""

    def __init__(self, inner: httpx.BaseTransport) -> None:
        self.inner = inner

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = self.inner.handle_request(request)
        if (
            request.method != "POST"
            or request.url.path not in EVALUATION_PATHS
            or not response.is_success
        ):
            return response
        body = read_whole(response)
        answer = decoded(request, response, body)
        try:
            data = json.loads(body)
        except ValueError:
            return answer  # the client says what is wrong with it
        if not isinstance(data, dict):
            return answer
        data[MARK] = {
            "judge": answer.headers.get(_JUDGE_HEADER) or PLATFORM,
            "source": "cache" if answer.headers.get(HIT_HEADER) == "hit" else "fresh",
        }
        return decoded(request, answer, json.dumps(data).encode())

    def close(self) -> None:
        self.inner.close()


def stamp(row: dict[str, Any], response: Any, model_core: str | None) -> dict[str, Any]:
    """``row`` with ``judge``, ``model_core`` (the platform's: the core asked for, ``None`` for
    its default) and ``source`` (``fresh`` or ``cache``); all ``None`` for a pair not judged."""
    extra = getattr(response, "model_extra", None)
    mark = extra.get(MARK) if isinstance(extra, dict) else None
    judge = source = None
    if isinstance(mark, dict):
        judge, source = mark.get("judge"), mark.get("source")
    row["judge"] = judge
    row["model_core"] = model_core if judge == PLATFORM else None
    row["source"] = source
    return row


def judge_key(row: Mapping[str, Any]) -> str | None:
    """One name per judge for counting: ``heuristic``, ``platform``, ``platform align-...``."""
    judge = row.get("judge")
    if not isinstance(judge, str) or not judge:
        return None
    core = row.get("model_core")
    return f"{judge} {core}" if judge == PLATFORM and isinstance(core, str) and core else judge
