"""The FastAPI application: evaluation, background tasks, healthcheck and the dev routes."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, TypeVar

from fastapi import FastAPI, HTTPException, Request, Response
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ValidationError
from starlette.types import ASGIApp

from composo._core.cores import LIGHTNING_MODEL_CORES
from composo._core.wire import RewardRequest, TraceRequest, is_binary
from composo._version import __version__
from composo.server._bodies import parse_request, refusal, validation_detail
from composo.server._cases import json_or_none
from composo.server._config import ServerConfig
from composo.server._devswitch import DevSwitch, FaultList
from composo.server._gate import ApiKey, Body, Gate
from composo.server._history import CALLER, Caller, HistoryStore
from composo.server._otlp import mount as mount_otlp
from composo.server._platform_api import mount as mount_platform_api
from composo.server._received import ReceivedLog, judge_header_app
from composo.server._service import EvaluationService, UnknownEvaluatorError
from composo.server._store import IdempotencyConflict, TaskStore
from composo.server._tasks import TaskManager
from composo.server.judges import JudgeError, make_judge

_log = logging.getLogger("composo.server")
_R = TypeVar("_R", RewardRequest, TraceRequest)
MAX_IDEMPOTENCY_KEY = 255


def build_app(config: ServerConfig, received: ReceivedLog | None = None) -> ASGIApp:
    """FastAPI behind the gate, every answer naming the judge; ``received`` keeps the requests.
    The store and the judge are made now, so a bad setting fails before the port is bound."""
    judge = make_judge(config.judge, config.judge_options)
    service = EvaluationService(judge, config.latency)
    store = TaskStore(config.db, config.task_lease_seconds)
    history = HistoryStore(config, store.client_id)
    dev = DevSwitch() if config.dev_faults else None

    async def _judge(request: RewardRequest | TraceRequest) -> dict[str, Any]:
        if isinstance(request, TraceRequest):
            return await service.trace(request)
        return await service.reward(request)

    _run = history.recorded(_judge)
    manager = TaskManager(store, _run, config.max_background)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        manager.start()
        writer = asyncio.get_running_loop().create_task(history.keep_flushing())
        try:
            yield
        finally:
            writer.cancel()
            await manager.aclose()
            await judge.aclose()
            store.close()
            history.close()

    app = FastAPI(
        title="Composo local evaluation server",
        version=__version__,
        lifespan=lifespan,
        docs_url="/docs" if config.dev_faults else None,
        redoc_url=None,
    )

    async def parse(request: Request, model: type[_R], key: bytes | None, body: bytes) -> _R:
        CALLER.set(Caller(key, request.scope["path"]))
        parsed = await parse_request(body, model)
        try:
            criterion = service.criterion(parsed)
        except UnknownEvaluatorError as exc:
            raise HTTPException(422, str(exc)) from None
        if parsed.model_core in LIGHTNING_MODEL_CORES and not is_binary(criterion):
            # The request model checks evaluation_criteria; a named evaluator is known only now.
            raise HTTPException(
                422,
                f"model_core {parsed.model_core!r} takes only binary criteria ('Passes if ...' / "
                f"'Fails if ...'); evaluator_name {parsed.evaluator_name!r} is not one",
            )
        return parsed

    async def evaluate(
        request: Request, model: type[_R], key: bytes | None, body: bytes
    ) -> Response:
        parsed = await parse(request, model, key, body)  # an HTTPException is answered by FastAPI
        try:
            return JSONResponse(await _run(parsed))
        except JudgeError as exc:
            _log.warning("judge %s failed: %s", judge.name, exc)
            return refusal(f"the {judge.name} judge failed: {exc}", 502)
        except Exception as exc:
            # A judge (a plugin's, say) that breaks still answers in the platform's error shape.
            _log.warning("judge %s raised %s", judge.name, type(exc).__name__)
            return refusal(f"the {judge.name} judge raised {type(exc).__name__}: {exc}", 500)

    async def background(
        request: Request, model: type[_R], key: bytes | None, body: bytes
    ) -> Response:
        idem = request.headers.get("idempotency-key")
        if idem is not None and not 1 <= len(idem) <= MAX_IDEMPOTENCY_KEY:
            return refusal(f"Idempotency-Key: 1 to {MAX_IDEMPOTENCY_KEY} characters, one per call")
        parsed = await parse(request, model, key, body)
        try:
            task_id = await manager.submit(parsed, key, idem)
        except sqlite3.Error as exc:
            _log.warning("task database error: %s", exc)
            return refusal(f"the task database is unavailable: {exc}", 503)
        except IdempotencyConflict:
            return refusal(
                "Idempotency-Key: already used for a different request; send a new key with "
                "each new submission (and the same key only when repeating one)"
            )
        return JSONResponse({"task_id": task_id})

    for suffix, handle in (("", evaluate), ("/background", background)):
        for kind, model in (("reward", RewardRequest), ("trace", TraceRequest)):
            ref = {"$ref": f"#/components/schemas/{model.__name__}"}
            body = {"required": True, "content": {"application/json": {"schema": ref}}}
            app.add_api_route(
                f"/api/v1/evals/{kind}{suffix}",
                _endpoint(handle, model),
                methods=["POST"],
                name=kind + suffix.replace("/", "_"),
                openapi_extra={"requestBody": body},
            )

    @app.get("/api/v1/evals/tasks/{task_id}")
    async def task(task_id: str, key: ApiKey) -> Response:
        info = await manager.info(task_id, key)
        if info is None:
            return refusal(f"no task with id {task_id!r} on this server", 404)
        return JSONResponse(info)

    @app.get("/api/healthcheck")
    async def healthcheck() -> Response:
        return JSONResponse({"status": "ok", "judge": judge.name, "version": __version__})

    if dev is not None:
        _dev_routes(app, dev)
    app.openapi = _with_request_models(app.openapi)  # type: ignore[method-assign]

    mount_otlp(app, config, manager)
    mount_platform_api(app, history)

    named = getattr(judge, "model", None)  # a judge that runs a model names it
    return judge_header_app(
        Gate(app, config, dev), config.judge, received, named if isinstance(named, str) else None
    )


def _endpoint(
    handle: Callable[[Request, Any, bytes | None, bytes], Awaitable[Response]],
    model: type[BaseModel],
) -> Callable[..., Awaitable[Response]]:
    async def endpoint(request: Request, key: ApiKey, body: Body) -> Response:
        return await handle(request, model, key, body)

    return endpoint


def _with_request_models(make: Callable[[], dict[str, Any]]) -> Callable[[], dict[str, Any]]:
    """The routes read their bodies themselves; the schema still documents them."""

    def openapi() -> dict[str, Any]:
        from pydantic.json_schema import models_json_schema

        schema = make()
        _, defs = models_json_schema(
            [(RewardRequest, "validation"), (TraceRequest, "validation")],
            ref_template="#/components/schemas/{model}",
        )
        schema.setdefault("components", {}).setdefault("schemas", {}).update(defs["$defs"])
        return schema

    return openapi


def _dev_routes(app: FastAPI, dev: DevSwitch) -> None:
    @app.post("/_dev/faults")
    async def queue_faults(body: Body) -> Response:
        try:
            faults = FaultList.model_validate_json(body)
        except ValidationError as exc:
            return refusal(validation_detail(exc, json_or_none(body)))
        return JSONResponse({"queued": dev.queue(faults.faults)})

    @app.delete("/_dev/faults")
    async def clear_faults() -> Response:
        dev.reset()
        return JSONResponse({"queued": 0})

    @app.get("/_dev/requests")
    async def recorded() -> Response:
        return JSONResponse(dev.requests)
