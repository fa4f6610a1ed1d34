"""The FastAPI application: the platform's evaluation endpoints, background tasks, healthcheck
and (when switched on) the development routes."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, TypeVar

from fastapi import FastAPI, Request, Response
from pydantic import ValidationError

from composo._core.wire import LIGHTNING_MODEL_CORES, RewardRequest, TraceRequest, is_binary
from composo._version import __version__
from composo.server._bodies import dumps, validation_detail
from composo.server._config import ServerConfig
from composo.server._devswitch import DevSwitch, FaultList
from composo.server._gate import BODY_SCOPE_KEY, Gate
from composo.server._guards import KeyCheck, RateLimiter
from composo.server._service import EvaluationService, UnknownEvaluatorError
from composo.server._store import TaskStore
from composo.server._tasks import TaskManager
from composo.server.judges import JudgeError, make_judge

__all__ = ["build_app"]

_log = logging.getLogger("composo.server")
_R = TypeVar("_R", RewardRequest, TraceRequest)


def _json(obj: Any, status: int = 200) -> Response:
    return Response(dumps(obj), status_code=status, media_type="application/json")


class _Refused(Exception):
    def __init__(self, status: int, detail: str) -> None:
        self.status = status
        self.detail = detail


def build_app(config: ServerConfig) -> Gate:
    """The ASGI application for ``config``: FastAPI behind the gate. Opens the task store and
    builds the judge now, so a bad setting fails before the port is bound."""
    judge = make_judge(config.judge, config.judge_options)
    service = EvaluationService(judge, config.latency)
    store = TaskStore(config.db)
    state: dict[str, TaskManager] = {}
    dev = DevSwitch.empty() if config.dev_faults else None

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        manager = TaskManager(store, _run, config.max_background)
        state["tasks"] = manager
        manager.resume()
        try:
            yield
        finally:
            await manager.aclose()
            await judge.aclose()
            store.close()

    async def _run(request: RewardRequest | TraceRequest) -> dict[str, Any]:
        if isinstance(request, TraceRequest):
            return await service.trace(request)
        return await service.reward(request)

    app = FastAPI(
        title="Composo local evaluation server",
        version=__version__,
        lifespan=lifespan,
        docs_url="/docs" if config.dev_faults else None,
        redoc_url=None,
    )

    def parse(request: Request, model: type[_R]) -> _R:
        body: bytes = request.scope.get(BODY_SCOPE_KEY, b"")
        try:
            parsed = model.model_validate_json(body)
        except ValidationError as exc:
            raise _Refused(422, validation_detail(exc)) from None
        try:
            criterion = service.criterion(parsed)
        except UnknownEvaluatorError as exc:
            raise _Refused(422, str(exc)) from None
        if parsed.model_core in LIGHTNING_MODEL_CORES and not is_binary(criterion):
            # The request model checks evaluation_criteria; a named evaluator is known only now.
            raise _Refused(
                422,
                f"model_core {parsed.model_core!r} takes only binary criteria ('Passes if ...' / "
                f"'Fails if ...'); evaluator_name {parsed.evaluator_name!r} is not one",
            )
        return parsed

    async def evaluate(request: Request, model: type[_R]) -> Response:
        try:
            parsed = parse(request, model)
            return _json(await _run(parsed))
        except _Refused as exc:
            return _json({"detail": exc.detail}, exc.status)
        except JudgeError as exc:
            _log.warning("judge %s failed: %s", judge.name, exc)
            return _json({"detail": f"the {judge.name} judge failed: {exc}"}, 502)
        except Exception as exc:
            # A judge (a plugin's, say) that breaks still answers in the platform's error shape.
            _log.warning("judge %s raised %s", judge.name, type(exc).__name__)
            return _json(
                {"detail": f"the {judge.name} judge raised {type(exc).__name__}: {exc}"}, 500
            )

    async def background(request: Request, model: type[_R]) -> Response:
        try:
            parsed = parse(request, model)
        except _Refused as exc:
            return _json({"detail": exc.detail}, exc.status)
        return _json({"task_id": await state["tasks"].submit(parsed)})

    @app.post("/api/v1/evals/reward")
    async def reward(request: Request) -> Response:
        return await evaluate(request, RewardRequest)

    @app.post("/api/v1/evals/trace")
    async def trace(request: Request) -> Response:
        return await evaluate(request, TraceRequest)

    @app.post("/api/v1/evals/reward/background")
    async def reward_background(request: Request) -> Response:
        return await background(request, RewardRequest)

    @app.post("/api/v1/evals/trace/background")
    async def trace_background(request: Request) -> Response:
        return await background(request, TraceRequest)

    @app.get("/api/v1/evals/tasks/{task_id}")
    async def task(task_id: str) -> Response:
        info = await state["tasks"].info(task_id)
        if info is None:
            return _json({"detail": f"no task with id {task_id!r} on this server"}, 404)
        return _json(info)

    @app.get("/api/healthcheck")
    async def healthcheck() -> Response:
        return _json({"status": "ok", "judge": judge.name, "version": __version__})

    if dev is not None:
        _dev_routes(app, dev)

    # -- OTLP trace receiver (composo serve --otlp; composo.server._otlp) --
    from composo.server._otlp import mount as mount_otlp

    mount_otlp(app, config, lambda: state["tasks"])
    # -- end OTLP trace receiver --

    return Gate(
        app,
        keys=KeyCheck(config.api_keys),
        max_body_bytes=config.max_body_bytes,
        limiter=None
        if config.rate_limit_per_minute is None
        else RateLimiter(config.rate_limit_per_minute),
        dev=dev,
    )


def _dev_routes(app: FastAPI, dev: DevSwitch) -> None:
    @app.post("/_dev/faults")
    async def queue_faults(request: Request) -> Response:
        try:
            body = FaultList.model_validate_json(await request.body())
        except ValidationError as exc:
            return _json({"detail": validation_detail(exc)}, 422)
        dev.faults.extend(body.faults)
        return _json({"queued": len(dev.faults)})

    @app.delete("/_dev/faults")
    async def clear_faults() -> Response:
        dev.reset()
        return _json({"queued": 0})

    @app.get("/_dev/requests")
    async def recorded() -> Response:
        return _json(dev.requests)
