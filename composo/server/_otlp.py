"""``composo serve --otlp``: an OTLP/HTTP trace receiver (``POST /v1/traces``). Each finished
trace is evaluated against the criteria as background tasks, ``GET /v1/traces/{trace_id}`` names
them, and each result is appended to the results file as a ``composo evaluate`` row."""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import zlib
from collections import OrderedDict
from pathlib import Path
from typing import Any

from fastapi import Depends, FastAPI, HTTPException, Request, Response
from fastapi.responses import JSONResponse

from composo._core.responses import MultiAgentTraceResponse
from composo._core.wire import TraceRequest
from composo.server._bodies import refusal
from composo.server._cases import json_or_none
from composo.server._config import ServerConfig
from composo.server._gate import KeyCheck, read_body
from composo.server._tasks import TaskManager

_log = logging.getLogger("composo.server")
_KEPT_TRACES = 1000
_POLL_SECONDS = 0.05


def _next_index(results: Path | None) -> int:
    """One past the highest row index already in ``results``: a restarted server appends."""
    if results is None or not results.exists():
        return 0
    with results.open("rb") as f:
        rows = (json_or_none(line) for line in f)
        indexes = (
            r["index"] for r in rows if isinstance(r, dict) and isinstance(r.get("index"), int)
        )
        return max(indexes, default=-1) + 1


def mount(app: FastAPI, config: ServerConfig, tasks: TaskManager) -> None:
    """Add the OTLP routes when ``config.otlp`` asks for them."""
    options = config.otlp
    if options is None:
        return
    sink = options.sink()  # this server's own: nothing is shared with another in the process
    kept: OrderedDict[str, dict[str, Any]] = OrderedDict()
    indexes = itertools.count(_next_index(options.results))
    sweeper: list[asyncio.Task[None]] = []
    running: set[asyncio.Task[None]] = set()
    writing = asyncio.Lock()
    keys = KeyCheck(config.api_keys)

    async def key_check(request: Request) -> None:
        """The API-Key header, or an OTLP exporter's ``Authorization: Bearer``."""
        given = request.headers.get("api-key") or ""
        auth = request.headers.get("authorization") or ""
        if auth.lower().startswith("bearer "):
            given = given or auth[7:]
        if keys.problem(given.encode()) is not None:
            raise HTTPException(401, "missing or wrong API key: send the API-Key header")

    async def evaluate(converted: Any) -> None:
        index, trace, trace_id = next(indexes), converted.trace, converted.trace_id
        entry: dict[str, Any] = {
            "trace_id": trace_id,
            "index": index,
            "spans": converted.spans,
            "notes": list(converted.notes),
            "error": converted.error,
            "trace": None if trace is None else trace.model_dump(mode="json", exclude_none=True),
            "tasks": {},
        }
        if trace is None:
            _log.warning("OTLP %s", converted.error)
        for criterion in options.criteria:
            if trace is None:
                await write(_row(index, trace_id, criterion, None, converted.error))
                continue
            task_id = await tasks.submit(TraceRequest(trace=trace, evaluation_criteria=criterion))
            entry["tasks"][criterion] = task_id
            job = asyncio.get_running_loop().create_task(
                collect(task_id, index, trace_id, criterion)
            )
            running.add(job)  # held until done: the loop keeps only weak references
            job.add_done_callback(running.discard)
        kept[trace_id] = entry  # shown once every task id is known
        while len(kept) > _KEPT_TRACES:
            kept.popitem(last=False)

    async def collect(task_id: str, index: int, trace_id: str, crit: str) -> None:
        while (info := await tasks.info(task_id)) and info["status"] in ("pending", "running"):
            await asyncio.sleep(_POLL_SECONDS)
        outcome: MultiAgentTraceResponse | str
        if info is not None and info["status"] == "succeeded":
            outcome = MultiAgentTraceResponse.model_validate(info["result"])
        else:
            outcome = f"TaskFailed: {(info or {}).get('error') or 'the task is gone'}"
        await write(_row(index, trace_id, crit, task_id, outcome))

    async def write(row: dict[str, Any]) -> None:
        if options.results is None:
            return
        data = (json.dumps(row, ensure_ascii=False) + "\n").encode()
        async with writing:
            await asyncio.to_thread(_append, options.results, data)

    async def drain() -> None:
        # converting a large trace is CPU work: off the event loop
        for converted in await asyncio.to_thread(sink.finished):
            try:
                await evaluate(converted)
            except Exception:
                _log.exception("could not evaluate OTLP trace %s", converted.trace_id)

    async def sweep() -> None:
        pause = max(0.05, min(1.0, sink.idle_seconds / 4))
        while True:
            await asyncio.sleep(pause)
            await drain()

    @app.post("/v1/traces", dependencies=[Depends(key_check)])
    async def traces(request: Request) -> Response:
        body = await read_body(request, config.max_body_bytes)
        encoding = (request.headers.get("content-encoding") or "").lower()
        content_type = request.headers.get("content-type") or "application/json"
        try:
            if body is not None and encoding in ("gzip", "deflate"):
                # held to the same limit decompressed: a small body can inflate a thousandfold
                body = _inflate(body, encoding, config.max_body_bytes)
            if body is None:
                return refusal(f"body over {config.max_body_bytes} bytes", 413)
            accepted = await asyncio.to_thread(sink.ingest, body, content_type)
        except (ValueError, OSError, EOFError, zlib.error) as exc:
            return refusal(f"not an OTLP trace export: {exc}", 400)
        if not sweeper:
            sweeper.append(asyncio.get_running_loop().create_task(sweep()))
        await drain()
        _log.debug("OTLP: %d span(s) accepted", accepted)
        if content_type.startswith("application/x-protobuf"):
            # an empty ExportTraceServiceResponse: everything was accepted
            return Response(b"", media_type="application/x-protobuf")
        return JSONResponse({})

    @app.get("/v1/traces/{trace_id}", dependencies=[Depends(key_check)])
    async def trace_status(trace_id: str) -> Response:
        entry = kept.get(trace_id.lower())
        if entry is None:
            return refusal(f"no finished trace {trace_id!r} on this server", 404)
        return JSONResponse(entry)


def _append(path: Path, data: bytes) -> None:
    with path.open("ab") as f:
        f.write(data)


def _row(
    index: int,
    trace_id: str,
    criterion: str,
    task: str | None,
    outcome: MultiAgentTraceResponse | str | None,
) -> dict[str, Any]:
    """A ``composo evaluate`` row; ``outcome`` is the verdict, or what went wrong."""
    verdict = outcome if isinstance(outcome, MultiAgentTraceResponse) else None
    return {
        "index": index,
        "id": trace_id,
        "criterion": criterion,
        "score": verdict.overall_score if verdict is not None else None,
        "explanation": verdict.explanation if verdict is not None else None,
        "error": outcome if verdict is None else None,
        "task_id": task,
    }


def _inflate(body: bytes, encoding: str, limit: int) -> bytes | None:
    """``body`` decompressed (gzip or zlib's deflate), or ``None`` past ``limit`` bytes."""
    inflater = zlib.decompressobj(wbits=31 if encoding == "gzip" else 15)
    out = inflater.decompress(body, limit + 1)
    if len(out) > limit:
        return None
    if not inflater.eof:
        raise ValueError(f"the {encoding} stream is cut short")
    return out
