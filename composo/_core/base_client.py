"""What both clients share: configuration, headers, paths, decoding. Only transport differs."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

import httpx

from composo._core.cores import check_model_core
from composo._core.options import check_names
from composo._core.retry import parse_retry_after
from composo._version import __version__
from composo.errors import (
    APIConnectionError,
    APITimeoutError,
    ComposoError,
    ComposoValidationError,
    TaskFailedError,
    status_error,
)

if TYPE_CHECKING:  # the model modules load on first use, not with the client
    from composo._core.plan import BatchResults, Plan, Progress
    from composo._core.responses import EvaluationResponse, MultiAgentTraceResponse, TaskInfo
    from composo._core.wire import RewardRequest, TraceRequest

__all__ = ["DEFAULT_BASE_URL", "BaseClient"]

DEFAULT_BASE_URL = "https://platform.composo.ai"
REWARD_PATH = "/api/v1/evals/reward"
TRACE_PATH = "/api/v1/evals/trace"
TASK_PATH = "/api/v1/evals/tasks/{task_id}"
_REQUEST_ID_HEADERS = ("x-request-id", "request-id", "x-amzn-requestid")


class BaseClient:
    """Configuration and decoding shared by :class:`Composo` and :class:`AsyncComposo`."""

    def __init__(
        self,
        api_key: str | None,
        base_url: str | None,
        num_retries: int,
        model_core: str | None,
        timeout: float,
        max_concurrent_requests: int,
    ) -> None:
        key = api_key if api_key is not None else os.environ.get("COMPOSO_API_KEY")
        if not key or not key.strip():
            raise ComposoValidationError(
                "api_key: no API key; pass Composo(api_key=...) or set the COMPOSO_API_KEY "
                "environment variable"
            )
        if not isinstance(num_retries, int) or isinstance(num_retries, bool) or num_retries < 1:
            raise ComposoValidationError(
                f"num_retries: must be an integer of at least 1 (retries cannot be disabled), "
                f"got {num_retries!r}"
            )
        if not isinstance(timeout, (int, float)) or timeout <= 0:
            raise ComposoValidationError(
                f"timeout: must be a positive number of seconds, got {timeout!r}"
            )
        if not isinstance(max_concurrent_requests, int) or max_concurrent_requests < 1:
            raise ComposoValidationError(
                "max_concurrent_requests: must be an integer of at least 1, "
                f"got {max_concurrent_requests!r}"
            )
        key = key.strip()
        if not (key.isascii() and key.isprintable()):
            # httpx would refuse the header with the key in its message; say it without the key.
            raise ComposoValidationError(
                "api_key: contains characters an HTTP header cannot carry (a line break, a "
                "control or non-ASCII character); check how the key was pasted or read"
            )
        self._api_key = key
        url = (base_url or os.environ.get("COMPOSO_BASE_URL") or DEFAULT_BASE_URL).strip()
        if not url.lower().startswith(("http://", "https://")) or not url.split("://", 1)[1]:
            raise ComposoValidationError(
                f"base_url: {url!r} is not an http(s) URL; give the scheme and host, e.g. "
                f"{DEFAULT_BASE_URL} or http://127.0.0.1:8787 (also COMPOSO_BASE_URL)"
            )
        self.base_url = url.rstrip("/")
        self.num_retries = num_retries
        try:
            self.model_core = check_model_core(model_core)
        except ValueError as exc:
            raise ComposoValidationError(str(exc)) from None
        self.timeout = float(timeout)
        self.max_concurrent_requests = max_concurrent_requests

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(base_url={self.base_url!r}, api_key='***', "
            f"num_retries={self.num_retries}, timeout={self.timeout})"
        )

    # -- requests ---------------------------------------------------------------------------

    def _options(self, options: Mapping[str, Any], where: str) -> dict[str, Any]:
        """The call's options, checked by name, with the client's ``model_core`` as default."""
        check_names(options, where)
        out = dict(options)
        if out.get("model_core") is None:
            out["model_core"] = self.model_core
        return out

    def _reward_requests(
        self,
        criteria: Any,
        evaluator_name: Any,
        options: Mapping[str, Any],
        messages: Any,
        input: Any,
        result: Any,
        system: str | None,
        tools: Any,
    ) -> tuple[list[RewardRequest], bool]:
        from composo._core import build

        conversation = {"messages": messages, "input": input, "result": result}
        return build.reward_requests(
            criteria,
            evaluator_name,
            self._options(options, "evaluate"),
            **conversation,
            system=system,
            tools=tools,
        )

    def _trace_requests(
        self, trace: Any, criteria: Any, evaluator_name: Any, options: Mapping[str, Any]
    ) -> tuple[list[TraceRequest], bool]:
        from composo._core import build

        return build.trace_requests(
            criteria, evaluator_name, self._options(options, "evaluate_trace"), trace=trace
        )

    def _plan(
        self,
        items: Any,
        criteria: Any,
        evaluator_name: Any,
        concurrency: int | None,
        progress: bool | Callable[[int, int | None], None],
        options: Mapping[str, Any],
    ) -> tuple[Plan, int, Progress | None]:
        """What ``evaluate_many`` checks before the first request (shared by both forms)."""
        from composo._core import plan

        return plan.setup(
            items,
            criteria,
            evaluator_name,
            concurrency,
            progress,
            self.max_concurrent_requests,
            self._options(options, "evaluate_many"),
        )

    @staticmethod
    def _ordered(results: Iterable[Any], plan: Plan) -> BatchResults:
        from composo._core.plan import ordered

        return ordered(results, plan)

    def _headers(self) -> dict[str, str]:
        return {
            "API-Key": self._api_key,
            "User-Agent": f"composo-python/{__version__}",
            "Accept": "application/json",
        }

    @staticmethod
    def _path(request: RewardRequest | TraceRequest, block: bool) -> str:
        from composo._core.wire import TraceRequest

        path = TRACE_PATH if isinstance(request, TraceRequest) else REWARD_PATH
        return path if block else path + "/background"

    # -- responses --------------------------------------------------------------------------

    @staticmethod
    def _decode(response: httpx.Response) -> Any:
        try:
            body = response.json()
        except ValueError:
            body = response.text
        if response.is_success:
            return body
        request_id = next(
            (response.headers[h] for h in _REQUEST_ID_HEADERS if h in response.headers), None
        )
        exc = status_error(response.status_code, body, request_id)
        exc.retry_after = parse_retry_after(response.headers)
        raise exc

    @staticmethod
    def _parse(request: RewardRequest | TraceRequest, body: Any, block: bool) -> Any:
        from pydantic import ValidationError

        from composo._core.responses import EvaluationResponse, MultiAgentTraceResponse
        from composo._core.wire import TraceRequest

        if not isinstance(body, dict):
            raise ComposoError(f"unexpected response body: {str(body)[:200]}", response_body=body)
        if not block:
            return dict(body)
        criterion = request.evaluation_criteria or request.evaluator_name
        try:
            if isinstance(request, TraceRequest):
                return MultiAgentTraceResponse.model_validate({**body, "criterion": criterion})
            return EvaluationResponse.model_validate({**body, "criterion": criterion})
        except ValidationError as exc:
            raise ComposoError(f"unexpected response body: {exc}", response_body=body) from None

    @staticmethod
    def _deadline(timeout: float | None) -> float | None:
        return None if timeout is None else time.monotonic() + timeout

    @staticmethod
    def _check_deadline(
        task_id: str, deadline: float | None, timeout: float | None, poll_interval: float
    ) -> None:
        if deadline is not None and time.monotonic() + poll_interval > deadline:
            raise APITimeoutError(f"task {task_id} still not finished after {timeout}s")

    @staticmethod
    def _task_outcome(info: TaskInfo) -> EvaluationResponse | MultiAgentTraceResponse | None:
        """The task's result when it is finished, ``None`` while it runs; raises if it failed."""
        if info.status == "failed":
            raise TaskFailedError(
                f"task {info.task_id} failed: {info.error}", response_body=info.error
            )
        if info.status != "succeeded" or info.result is None:
            return None
        from composo._core.responses import EvaluationResponse, MultiAgentTraceResponse

        if "results_by_agent_name" in info.result:
            return MultiAgentTraceResponse.model_validate(info.result)
        return EvaluationResponse.model_validate(info.result)

    @staticmethod
    def _transport_error(exc: httpx.HTTPError, url: str) -> ComposoError:
        if isinstance(exc, httpx.TimeoutException):
            return APITimeoutError(f"request to {url} timed out")
        return APIConnectionError(f"could not reach {url}: {exc.__class__.__name__}: {exc}")

    def _attempt(self, method: str, url: str, json: Any, deadline: float) -> dict[str, Any]:
        """The arguments of one attempt's ``request()``: what is left of the call's timeout."""
        return {
            "method": method,
            "url": url,
            "json": json,
            "headers": self._headers(),
            "timeout": self._attempt_timeout(deadline),
        }

    def _attempt_timeout(self, deadline: float) -> httpx.Timeout:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise APITimeoutError(f"timeout of {self.timeout}s reached")
        return httpx.Timeout(remaining)
