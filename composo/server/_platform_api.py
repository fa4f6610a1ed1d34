"""The platform's account and history routes (usage, evaluations filter, traces) for the
caller's API key, read in a worker thread so a large page never stalls the event loop."""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import datetime, timezone

from fastapi import FastAPI, Request, Response
from fastapi.responses import JSONResponse
from pydantic import ValidationError

from composo._platform_types import (
    EVALUATIONS_FILTER_PATH,
    TRACES_DEFAULT_PAGE_SIZE,
    TRACES_MAX_PAGE_SIZE,
    TRACES_PATH,
    USAGE_PATH,
    EvaluationFilterRequest,
)
from composo.server._bodies import refusal, validation_detail
from composo.server._gate import ApiKey, Body
from composo.server._history import MAX_PAGE_SIZE, HistoryStore


def mount(app: FastAPI, history: HistoryStore) -> None:
    @app.get(USAGE_PATH)
    async def usage(key: ApiKey) -> Response:
        return JSONResponse(await asyncio.to_thread(history.usage, key))

    @app.post(EVALUATIONS_FILTER_PATH)
    async def filter_evaluations(key: ApiKey, body: Body) -> Response:
        try:
            data = json.loads(body or b"{}")
        except ValueError:
            return refusal('body: not JSON; send a JSON object such as {"page": 1}')
        try:
            query = EvaluationFilterRequest.model_validate(data)
        except ValidationError as exc:
            return refusal(validation_detail(exc, data))
        if query.page_size is not None and query.page_size > MAX_PAGE_SIZE:
            return refusal(f"page_size: at most {MAX_PAGE_SIZE} (ask for the next page instead)")
        return JSONResponse(await asyncio.to_thread(history.evaluations, key, query))

    @app.get(TRACES_PATH)
    async def list_traces(request: Request, key: ApiKey) -> Response:
        params = request.query_params
        unknown = sorted(set(params) - {"page_token", "page_size", "start_date", "end_date"})
        if unknown:
            return refusal(
                f"{unknown[0]}: not a parameter of {TRACES_PATH}; use page_token, page_size, "
                "start_date or end_date"
            )
        try:
            size = int(params.get("page_size", TRACES_DEFAULT_PAGE_SIZE))
        except ValueError:
            return refusal("page_size: expected an integer")
        if not 1 <= size <= TRACES_MAX_PAGE_SIZE:
            return refusal(f"page_size: must be between 1 and {TRACES_MAX_PAGE_SIZE}, got {size}")
        try:
            start = _when(params.get("start_date"), "start_date")
            end = _when(params.get("end_date"), "end_date")
            page = await asyncio.to_thread(
                history.traces, key, params.get("page_token"), size, start, end
            )
        except ValueError as exc:
            return refusal(str(exc))
        return JSONResponse(page)

    @app.get(TRACES_PATH + "/{trace_id}")
    async def get_trace(trace_id: str, key: ApiKey) -> Response:
        try:
            canonical = str(uuid.UUID(trace_id))
        except ValueError:
            return refusal(f"trace_id: {trace_id[:64]!r} is not a UUID")
        found = await asyncio.to_thread(history.trace, key, canonical)
        if found is None:
            return refusal(f"no trace with id {canonical!r} for this API key", 404)
        return JSONResponse(found)


def _when(text: str | None, name: str) -> float | None:
    """An ISO date-time (UTC when it names no zone) as seconds since the epoch."""
    if text is None:
        return None
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(
            f"{name}: {text[:64]!r} is not an ISO date-time; write it like 2025-01-31T12:00:00Z"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.timestamp()
