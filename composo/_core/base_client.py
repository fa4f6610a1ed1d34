"""What both clients share: configuration, headers, paths, decoding. Only transport differs."""

from __future__ import annotations

import functools
import json as jsonlib
import os
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypedDict, TypeVar, cast
from urllib.parse import quote

import httpx

from composo._core.body import ACCEPT_ENCODING, Inflater
from composo._core.cores import check_model_core
from composo._core.limits import (
    DEFAULT_MAX_CONCURRENT_REQUESTS,
    DEFAULT_NUM_RETRIES,
    DEFAULT_TIMEOUT,
    MAX_TASK_ID_LENGTH,
    MAX_THROTTLE_WAITS,
)
from composo._core.options import (  # the aliases: for get_type_hints
    DataRetention,
    ExplanationCleaning,
    Tags,
    check_names,
    keywords_checked,
    unknown_argument,
)
from composo._core.provenance import (
    CACHE_HEADER,
    JUDGE_HEADER,
    JUDGE_MODEL_HEADER,
    Provenance,
)
from composo._core.ratelimit import Throttle, check_requests_per_minute, rate_limit_reset
from composo._core.retry import Policy, parse_retry_after
from composo._version import __version__
from composo.errors import (
    APIConnectionError,
    APITimeoutError,
    ComposoError,
    ComposoValidationError,
    RateLimitError,
    TaskFailedError,
    UnexpectedResponseError,
    status_error,
)

if TYPE_CHECKING:  # the model modules load on first use, not with the client
    from composo._core.plan import Plan, Progress
    from composo._core.responses import EvaluationResponse, MultiAgentTraceResponse, TaskInfo
    from composo._core.wire import RewardRequest, TraceRequest

DEFAULT_BASE_URL = "https://platform.composo.ai"
REWARD_PATH = "/api/v1/evals/reward"
TRACE_PATH = "/api/v1/evals/trace"
TASK_PATH = "/api/v1/evals/tasks/{task_id}"
_REQUEST_ID_HEADERS = ("x-request-id", "request-id", "x-amzn-requestid")
_PROVENANCE_HEADERS = frozenset((JUDGE_HEADER, JUDGE_MODEL_HEADER, CACHE_HEADER))
_PLATFORM = Provenance()  # what an answer naming no judge says (the platform's never do)


# A request's own headers: none, those of a supplied ``http_client``'s calls, or with a key.
RequestHeaders = Mapping[str, str] | None
# One call's request, as each attempt sends it: method, URL, JSON body, own headers, deadline.
Call = tuple[str, str, Any, RequestHeaders, float]
# What makes the transport of a client's own httpx client (sync or async).
Maker = Callable[[], Any]
P = ParamSpec("P")
C = TypeVar("C")
R = TypeVar("R")


def awaited(
    method: Callable[Concatenate[C, P], R],
) -> Callable[Concatenate[C, P], Coroutine[Any, Any, R]]:
    """``method``, which returns a coroutine on the async client (typed as what it resolves
    to), as a coroutine function with its signature and documentation."""

    async def coroutine(self: C, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return await cast("Awaitable[R]", method(self, *args, **kwargs))

    return functools.wraps(method)(coroutine)


class Answer(dict[str, Any]):
    """A success's JSON object and its provenance, read from its headers once."""

    __slots__ = ("provenance",)

    def __init__(self, body: dict[str, Any], provenance: Provenance) -> None:
        super().__init__(body)
        self.provenance = provenance


class Settings(TypedDict, total=False):
    """The settings both core clients take by name (:class:`~composo.Composo` documents them)."""

    base_url: str | None
    num_retries: int
    model_core: str | None
    timeout: float
    max_concurrent_requests: int
    requests_per_minute: float | None


_DEFAULTS = Settings(
    num_retries=DEFAULT_NUM_RETRIES,
    timeout=DEFAULT_TIMEOUT,
    max_concurrent_requests=DEFAULT_MAX_CONCURRENT_REQUESTS,
)


class BaseClient:
    """Configuration and decoding shared by :class:`Composo` and :class:`AsyncComposo`."""

    def __init__(
        self,
        api_key: str | None,
        settings: Mapping[str, Any],
        http_client: object = None,
        transport: Maker | None = None,
    ) -> None:
        _check_settings(type(self), settings)
        given: dict[str, Any] = {**_DEFAULTS, **settings}
        key = api_key if api_key is not None else os.environ.get("COMPOSO_API_KEY")
        self._key_source = (
            "the api_key argument" if api_key is not None else "the COMPOSO_API_KEY variable"
        )
        self._api_key = _header_safe(key)
        _check_numbers(given["num_retries"], given["timeout"], given["max_concurrent_requests"])
        self.base_url = _base_url(given.get("base_url"))
        self.num_retries = given["num_retries"]
        self.model_core = check_model_core(given.get("model_core"), ComposoValidationError)
        self.timeout = float(given["timeout"])
        self.max_concurrent_requests = given["max_concurrent_requests"]
        self.requests_per_minute = check_requests_per_minute(given.get("requests_per_minute"))
        self._throttle = Throttle(self.requests_per_minute, self.max_concurrent_requests)
        self._base_headers = {
            "API-Key": self._api_key,
            "User-Agent": f"composo-python/{__version__}",
            "Accept": "application/json",
            "Accept-Encoding": ACCEPT_ENCODING,
        }
        if http_client is not None and transport is not None:
            raise ComposoValidationError(
                "transport: cannot be combined with http_client (the transport is that of the "
                "client's own httpx client); give one or the other"
            )
        self._owns_http = http_client is None
        self._transport: Maker = self._connections if transport is None else transport
        self._policy = Policy(self.num_retries)

    def _connections(self) -> Any:
        raise NotImplementedError

    @property
    def throttled(self) -> int:
        """429 answers this client has had so far (each one slowed it down)."""
        return self._throttle.throttled

    def pace(self) -> str | None:
        """The client's pace in words while the server throttles it (``"throttled: waiting
        12s as the server asked, then ..."``), ``None`` otherwise: for a progress line."""
        return self._throttle.status()

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

    def _given(self, **options: Any) -> dict[str, Any]:
        """The options ``evaluate`` and ``evaluate_trace`` name, with the client's
        ``model_core`` as default."""
        if options["model_core"] is None:
            options["model_core"] = self.model_core
        return options

    def _run_all(self, requests: Sequence[Any], block: bool) -> Any:
        """One request's answer, or several as a list (the async client's is a coroutine)."""
        raise NotImplementedError

    @keywords_checked
    def evaluate(
        self,
        messages: Any = None,
        input: Any = None,
        system: str | None = None,
        tools: Any = None,
        result: Any = None,
        criteria: str | Sequence[str] | None = None,
        block: bool = True,
        tags: Tags | None = None,
        evaluate_latest: bool | None = None,
        evaluator_name: str | Sequence[str] | None = None,
        explanation_cleaning: ExplanationCleaning | None = None,
        data_retention: DataRetention | None = None,
        *,
        model_core: str | None = None,
    ) -> Any:
        """Score a conversation against one or more criteria.

        The parameters come in the platform SDK's positional order (usually they are given by
        name); ``tags``, ``evaluate_latest``, ``explanation_cleaning``, ``data_retention`` and
        ``model_core`` are the options of :class:`~composo.types.EvaluateOptions`, where
        ``None`` means "not sent".

        Args:
            messages: The chat so far: OpenAI or Anthropic message dicts, or any object a plugin
                converts (give this or ``input``).
            input: The OpenAI Responses API ``input`` instead of ``messages``.
            system: The system prompt the assistant had.
            tools: The tools it was offered (OpenAI or Anthropic definitions).
            result: The answer to score, appended to the conversation (a message, a chat
                completion, a Responses ``Response``...).
            criteria: One criterion (``"Reward ..."``, ``"Penalize ..."``, ``"Passes if ..."``,
                ``"Fails if ..."``) or a list of them (or give ``evaluator_name``).
            block: ``False`` submits the evaluation and returns ``{"task_id": ...}`` at once.
            tags: Flat ``{str: str}`` labels stored with the evaluation.
            evaluate_latest: Score only the last assistant turn (``True``) or them all.
            evaluator_name: A saved evaluator's name (or a list), instead of ``criteria``.
            explanation_cleaning: ``"end_user"`` adds an explanation fit to show end users.
            data_retention: ``"standard"`` or ``"none"`` (nothing kept after answering).
            model_core: The evaluation model (default: the client's).

        Returns:
            One criterion (a string, or a list of one) gives one :class:`EvaluationResponse`;
            two or more give a list of them in the order given. With ``block=False``, a
            ``{"task_id": ...}`` dict in place of each response (awaited, on the async client).
            For a list whatever the count, use :meth:`evaluate_many`.

        Raises:
            ComposoValidationError: Bad input, before any network call.
            APIStatusError: The server refused the request (a subclass per status family).
            APIConnectionError: The server could not be reached (``APITimeoutError`` in time).
        """
        import composo._core.build as build  # not ``from ... import``: cheaper on every call

        options = self._given(
            model_core=model_core,
            tags=tags,
            evaluate_latest=evaluate_latest,
            explanation_cleaning=explanation_cleaning,
            data_retention=data_retention,
        )
        requests = build.reward_requests(
            criteria,
            evaluator_name,
            options,
            messages=messages,
            input=input,
            result=result,
            system=system,
            tools=tools,
        )
        return self._run_all(requests, block)

    @keywords_checked
    def evaluate_trace(
        self,
        trace: Any,
        criteria: str | Sequence[str] | None = None,
        model_core: str | None = None,
        block: bool = True,
        tags: Tags | None = None,
        evaluate_latest: bool | None = None,
        evaluator_name: str | Sequence[str] | None = None,
        data_retention: DataRetention | None = None,
        *,
        explanation_cleaning: ExplanationCleaning | None = None,
    ) -> Any:
        """Score a multi-agent trace against one or more criteria.

        The parameters come in the platform SDK's positional order; usually they are given
        by name.

        Args:
            trace: A :class:`MultiAgentTrace`, a dict of that shape, or an object a plugin
                converts (e.g. a captured agent run).
            criteria: One criterion or a list of them (or give ``evaluator_name``).
            model_core: The evaluation model (default: the client's).
            block: ``False`` submits the evaluation and returns ``{"task_id": ...}`` at once.
            tags: Flat ``{str: str}`` labels stored with the evaluation.
            evaluate_latest: Must not be ``True`` for traces.
            evaluator_name: A saved evaluator's name (or a list), instead of ``criteria``.
            data_retention: ``"standard"`` or ``"none"`` (nothing kept after answering).
            explanation_cleaning: Refused for traces, before any request (reward evaluations
                only).

        Returns:
            One criterion (a string, or a list of one) gives one
            :class:`MultiAgentTraceResponse`; two or more give a list in the order given. With
            ``block=False``, a ``{"task_id": ...}`` dict in place of each response.

        Raises:
            ComposoValidationError: Bad input, before any network call.
            APIStatusError: The server refused the request.
            APIConnectionError: The server could not be reached.
        """
        import composo._core.build as build

        options = self._given(
            model_core=model_core,
            tags=tags,
            evaluate_latest=evaluate_latest,
            explanation_cleaning=explanation_cleaning,
            data_retention=data_retention,
        )
        requests = build.trace_requests(criteria, evaluator_name, options, trace=trace)
        return self._run_all(requests, block)

    def _plan(self, items: Any, *args: Any) -> tuple[Plan, int, Progress | None]:
        """What ``evaluate_many`` checks before the first request (``args``: its arguments)."""
        from composo._core import plan

        *named, options = args
        given = self._options(options, "evaluate_many")
        return plan.setup(self.max_concurrent_requests, given, items, *named)

    def _headers(self, block: bool = True) -> RequestHeaders:
        """The request's own headers: a background submission's ``Idempotency-Key``, which its
        retries repeat (no second task after a lost answer), and for a supplied ``http_client``
        the common ones (the own client holds them: merging per request costs httpx much)."""
        common = None if self._owns_http else self._base_headers
        if block:
            return common
        import uuid

        return {**(common or {}), "Idempotency-Key": uuid.uuid4().hex}

    @staticmethod
    def _build(
        http: httpx.Client | httpx.AsyncClient,
        method: str,
        url: str,
        json: Any,
        headers: RequestHeaders,
        timeout: float,
    ) -> httpx.Request:
        """``headers`` set one by one: cheaper than httpx's merge into its defaults."""
        request = http.build_request(method, url, json=json, timeout=timeout)
        if headers:
            own = request.headers
            for name, value in headers.items():
                own[name] = value
        return request

    @staticmethod
    def _task_path(task_id: Any) -> str:
        """The task's URL path, its id checked and encoded as one path segment."""
        if not isinstance(task_id, str):
            raise ComposoValidationError(
                f"task_id: expected the string an evaluate(..., block=False) call returned in "
                f"'task_id', got {type(task_id).__name__}"
            )
        problem = None
        if not task_id.strip():
            problem = "is empty"
        elif len(task_id) > MAX_TASK_ID_LENGTH:
            problem = f"is longer than {MAX_TASK_ID_LENGTH} characters"
        elif task_id in (".", "..") or any(c in task_id for c in "/\\"):
            problem = "contains a path ('/', '\\', '.' or '..')"
        elif not task_id.isprintable() or any(c.isspace() for c in task_id):
            problem = "contains a space or a control character"
        if problem is not None:
            raise ComposoValidationError(
                f"task_id: {task_id[:80]!r} {problem}; pass the 'task_id' a block=False "
                "call returned"
            )
        return TASK_PATH.format(task_id=quote(task_id, safe=""))

    @staticmethod
    def _path(request: RewardRequest | TraceRequest, block: bool) -> str:
        path = TRACE_PATH if request.is_trace else REWARD_PATH
        return path if block else path + "/background"

    # -- responses --------------------------------------------------------------------------

    @staticmethod
    def _inflater(response: httpx.Response) -> tuple[Inflater, dict[str, str]]:
        """The bounded reader of the body, and the headers as a dict (each lookup in
        ``httpx.Headers`` scans them all)."""
        headers = dict(response.headers.items())
        if response.is_stream_consumed:
            inflater = Inflater(None)
            inflater.feed(response.content)
            return inflater, headers
        inflater = Inflater(headers.get("content-encoding"))
        inflater.check_length(headers.get("content-length"))
        return inflater, headers

    def _decode(self, response: httpx.Response, headers: dict[str, str], raw: bytes) -> Any:
        """The JSON body of a success (an object as an :class:`Answer`); else the status's error."""
        try:
            body = jsonlib.loads(raw)
        except ValueError:
            body = raw.decode("utf-8", "replace")
        status = response.status_code
        if 200 <= status < 300:
            self._throttle.passed(headers)
            if type(body) is not dict:
                return body
            named = not _PROVENANCE_HEADERS.isdisjoint(headers)
            return Answer(body, Provenance.from_headers(headers) if named else _PLATFORM)
        request_id = next((headers[h] for h in _REQUEST_ID_HEADERS if h in headers), None)
        exc = status_error(status, body, request_id)
        if status in (401, 404):
            exc.message += self._hint(response)
        exc.retry_after = parse_retry_after(headers)
        if status == 429:
            self._throttle.learn(headers)  # the quota's copy learns it is spent
            if exc.retry_after is None:
                exc.retry_after = rate_limit_reset(headers)
        raise exc

    def _hint(self, response: httpx.Response) -> str:
        """For a 401 where the key came from (never the key), for a 404 the URL and whether
        base_url holds the API's path already."""
        if response.status_code == 401:
            return f" (the key came from {self._key_source}; check it, it is not shown here)"
        request = response.request
        out = f": {request.method} {request.url.copy_with(query=None)}"
        path = self.base_url.split("://", 1)[1].partition("/")[2].rstrip("/")
        if path.startswith("api"):
            root = self.base_url[: len(self.base_url) - len(path) - 1]
            out += (
                f"; base_url ends in '/{path}', but the client adds the API path itself: use {root}"
            )
        return out

    def _admit(self, deadline: float) -> float:
        """``0.0``: the attempt may go; else the seconds to wait; raises when the pace would hold
        it past ``deadline``."""
        wait = self._throttle.admit(deadline)
        if wait is None:
            raise self._paced_out()
        return wait

    def _throttled(self, exc: RateLimitError, deadline: float, patient: bool, waits: int) -> float:
        """A 429: the seconds a patient attempt sleeps (0.0 when the client's hold is its wait),
        or raised (an impatient call counts it among its retries)."""
        wait = self._throttle.throttled_by(exc.retry_after, waits)
        if not patient or waits >= MAX_THROTTLE_WAITS:
            raise exc
        if exc.retry_after is None:
            if time.monotonic() + wait > deadline:
                raise exc
        elif (refusal := self._refusal(exc, deadline)) is not exc:
            raise refusal from None
        return wait

    def _refusal(self, exc: RateLimitError, deadline: float) -> RateLimitError:
        """``exc``, or one saying its ``Retry-After`` ends past the call's timeout."""
        wait, left = exc.retry_after, deadline - time.monotonic()
        if wait is None or wait <= left:
            return exc
        left = max(0.0, left)
        out = RateLimitError(
            f"{exc.message}; the server asks to wait {wait:.0f}s but this call's timeout leaves "
            f"{left:.0f}s (raise timeout= to wait it out, or slow down with "
            "requests_per_minute=)",
            status_code=exc.status_code,
            response_body=exc.response_body,
            request_id=exc.request_id,
        )
        out.retry_after = exc.retry_after
        return out

    @staticmethod
    def _parse(request: RewardRequest | TraceRequest, body: Any, block: bool) -> Any:
        if not isinstance(body, dict):
            raise UnexpectedResponseError(
                f"unexpected response body: {str(body)[:200]}", response_body=body
            )
        if not block:
            if not isinstance(body.get("task_id"), str):
                raise UnexpectedResponseError(
                    "unexpected response body: a background submission's answer has no "
                    f"'task_id': {str(body)[:200]}",
                    response_body=body,
                )
            return dict(body)
        criterion = request.evaluation_criteria or request.evaluator_name
        given = body.provenance.asked(request.model_core) if isinstance(body, Answer) else None
        return BaseClient._response(body, request.is_trace, criterion, given)

    @staticmethod
    def _response(
        body: dict[str, Any],
        trace: bool,
        criterion: str | None = None,
        provenance: Provenance | None = None,
    ) -> EvaluationResponse | MultiAgentTraceResponse:
        """A success body as its response model; one without the model's field is an error (an
        empty ``{}`` must not read as "not applicable", an explicit ``"score": null``)."""
        import composo._core.responses as responses

        field = "results_by_agent_name" if trace else "score"
        if field not in body:
            raise UnexpectedResponseError(
                f"unexpected response body: no {field!r} in a successful "
                f"{'trace ' if trace else ''}evaluation's answer: {str(body)[:200]}",
                response_body=body,
            )
        if criterion is not None:
            body = {**body, "criterion": criterion}
        model = responses.MultiAgentTraceResponse if trace else responses.EvaluationResponse
        try:
            return responses.judged(model.model_validate(body), provenance)
        except ValueError as exc:
            from pydantic import ValidationError  # loaded by then; imported only on a failure

            if not isinstance(exc, ValidationError):
                raise
            raise UnexpectedResponseError(
                f"unexpected response body: {exc}", response_body=body
            ) from None

    @staticmethod
    def _polls(task_id: str, timeout: float | None, poll_interval: float) -> Iterator[float]:
        """The waits between polls, until another would pass ``timeout`` (counted from this
        call, before the first poll)."""
        deadline = None if timeout is None else time.monotonic() + timeout

        def waits() -> Iterator[float]:
            while deadline is None or time.monotonic() + poll_interval <= deadline:
                yield poll_interval
            raise APITimeoutError(f"task {task_id} still not finished after {timeout}s")

        return waits()

    @staticmethod
    def _task_outcome(info: TaskInfo) -> EvaluationResponse | MultiAgentTraceResponse | None:
        """The task's result, ``None`` while it runs; raises if it failed."""
        if info.status == "failed":
            raise TaskFailedError(
                f"task {info.task_id} failed: {info.error}", response_body=info.error
            )
        if info.status != "succeeded" or info.result is None:
            return None
        trace = "results_by_agent_name" in info.result
        return BaseClient._response(info.result, trace, None, info.provenance)

    @staticmethod
    def _task_info(body: Any) -> TaskInfo:
        """A task's state from its answer, with the answer's provenance."""
        import composo._core.responses as responses

        info = responses.TaskInfo.model_validate(body)
        return responses.judged(info, body.provenance if isinstance(body, Answer) else None)

    @staticmethod
    def _transport_error(exc: httpx.HTTPError | OSError, url: str) -> ComposoError:
        if isinstance(exc, httpx.TimeoutException):
            return APITimeoutError(f"request to {url} timed out")
        return APIConnectionError(
            f"could not reach {url}: {exc.__class__.__name__}: {exc}{_connect_hint(exc, url)}"
        )

    def _attempt_timeout(self, deadline: float) -> float:
        """The seconds left (httpx applies one number to every phase)."""
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise APITimeoutError(f"timeout of {self.timeout}s reached")
        return remaining

    def _paced_out(self) -> APITimeoutError:
        return APITimeoutError(
            f"timeout of {self.timeout}s would pass before this client's pace lets the request "
            f"go ({self._throttle.status() or 'paced'}); raise timeout= or send fewer requests "
            "at once"
        )

    def _timed_out(self) -> APITimeoutError:
        return APITimeoutError(f"timeout of {self.timeout}s reached (the whole call is bounded)")


def _check_settings(cls: type, settings: Mapping[str, Any]) -> None:
    """Refuse a setting no client takes, as Python refuses an unknown keyword."""
    for name in settings:
        if name not in Settings.__annotations__:
            import inspect

            named = [n for n in inspect.signature(cls).parameters if n != "settings"]
            raise unknown_argument(cls.__name__, name, [*named, *Settings.__annotations__])


def _check_numbers(num_retries: Any, timeout: Any, max_concurrent_requests: Any) -> None:
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


def _header_safe(key: str | None) -> str:
    """``key`` stripped and refused here if a header cannot carry it (httpx's error shows it)."""
    key = (key or "").strip()
    if not key:
        raise ComposoValidationError(
            "api_key: no API key; pass Composo(api_key=...) or set the COMPOSO_API_KEY "
            "environment variable"
        )
    if not (key.isascii() and key.isprintable()):
        raise ComposoValidationError(
            "api_key: contains characters an HTTP header cannot carry (a line break, a "
            "control or non-ASCII character); check how the key was pasted or read"
        )
    return key


def _base_url(base_url: str | None) -> str:
    """The API's base URL (given, else ``COMPOSO_BASE_URL``, else the platform's), checked."""
    url = (base_url or os.environ.get("COMPOSO_BASE_URL") or DEFAULT_BASE_URL).strip()
    if not url.lower().startswith(("http://", "https://")) or not url.split("://", 1)[1]:
        raise ComposoValidationError(
            f"base_url: {url!r} is not an http(s) URL; give the scheme and host, e.g. "
            f"{DEFAULT_BASE_URL} or http://127.0.0.1:8787 (also COMPOSO_BASE_URL)"
        )
    return url.rstrip("/")


_LOOPBACK = ("localhost", "127.0.0.1", "::1")


def _connect_hint(exc: BaseException, url: str) -> str:
    """What a failed connection most likely means, from the causes it carries."""
    import socket
    import ssl

    target = httpx.URL(url)
    place = target.netloc.decode()
    cause: BaseException | None = exc
    while cause is not None:
        if (
            isinstance(cause, ssl.SSLError)
            and target.scheme == "https"
            and cause.reason in ("WRONG_VERSION_NUMBER", "RECORD_LAYER_FAILURE", "HTTP_REQUEST")
        ):
            return f"; the server speaks plain http? use http://{place}"
        if isinstance(cause, ConnectionRefusedError):
            if target.host in _LOOPBACK or target.host.startswith("127."):
                port = "" if target.port == 8787 else f" --port {target.port}"
                return (
                    f"; nothing listens on {place}: start a local server with `composo serve{port}`"
                )
            return f"; nothing listens on {place}: check the base URL, and that the server runs"
        if isinstance(cause, socket.gaierror):
            return f"; the host name {target.host!r} does not resolve: check the base URL"
        cause = cause.__cause__ or cause.__context__
    return ""
