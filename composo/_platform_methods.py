"""The account and history methods of both clients: each is its client's I/O around
:mod:`composo._platform`, loaded on first use so that importing a client stays cheap."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Generic, TypeVar
from urllib.parse import urlencode

from composo._core.base_client import awaited

if TYPE_CHECKING:
    from composo._core.ratelimit import RateLimits, Throttle
    from composo._platform import (  # noqa: F401 (named, quoted, by the classes' bases)
        AsyncEvaluationHistory,
        AsyncTraceListing,
        EvaluationHistory,
        TraceListing,
    )
    from composo._platform_types import TraceRecord, Usage

E = TypeVar("E")
T = TypeVar("T")


class _Listings(Generic[E, T]):
    """What both clients share: making a listing sends nothing; iterating it sends the requests.
    ``_platform`` is the client's I/O (a coroutine on the async client)."""

    _listings: tuple[str, str]  # the classes in composo._platform: evaluations', traces'
    _throttle: Throttle

    if TYPE_CHECKING:

        def _call(
            self, method: str, path: str, json: Any, *, block: bool = True, patient: bool = False
        ) -> Any: ...

    def _platform(self, method: str, path: str, params: Mapping[str, str] | None, body: Any) -> Any:
        return self._call(method, f"{path}?{urlencode(params)}" if params else path, body)

    def _get(self, path: str, model: type[Any], what: str) -> Any:
        """``GET path``, the answer validated as ``model``."""
        from composo._platform import parse

        return parse(model, self._platform("GET", path, None, None), what)

    def list_evaluations(
        self,
        *,
        tags: Mapping[str, str | Sequence[str]] | None = None,
        criteria: str | Sequence[str] | None = None,
        endpoint: str | None = None,
        page_size: int | None = None,
    ) -> E:
        """Past evaluations of this API key (``POST /api/v1/evaluations/filter``), fetched a
        page at a time as you iterate; ``.to_pandas()`` / ``.to_polars()`` give one row per
        evaluation (score, criterion, tags, model, latency, tokens, time). On the async client,
        an ``async for`` iterable whose conversions are awaited.

        Args:
            tags: Keep evaluations whose tag has this value (or one of these values), for every
                tag given: ``{"run": "nightly"}``.
            criteria: Keep evaluations against this criterion (or one of these).
            endpoint: ``"reward"`` or ``"trace"``.
            page_size: Evaluations per request (the platform's default when not given).

        Raises:
            ComposoValidationError: Bad arguments, before any request.
        """
        from composo import _platform

        query = _platform.evaluation_filter(tags, criteria, endpoint, page_size)
        listing: E = getattr(_platform, self._listings[0])(self._platform, query)
        return listing

    def list_traces(
        self,
        *,
        page_size: int | None = None,
        start_date: datetime | str | None = None,
        end_date: datetime | str | None = None,
    ) -> T:
        """Traces of this API key (``GET /api/v1/traces``) with their evaluations, rating and
        comments, fetched a page at a time as you iterate (``async for`` on the async client).

        Args:
            page_size: Traces per request, 1 to 500 (default 50).
            start_date: Only traces created at or after this time (a naive datetime is UTC).
            end_date: Only traces created at or before this time.

        Raises:
            ComposoValidationError: Bad arguments, before any request.
        """
        from composo import _platform

        params = _platform.trace_params(page_size, start_date, end_date)
        listing: T = getattr(_platform, self._listings[1])(self._platform, params)
        return listing


class PlatformMethods(_Listings["EvaluationHistory", "TraceListing"]):
    """Mixed into :class:`~composo.Composo` (the core's client plus this)."""

    _listings = ("EvaluationHistory", "TraceListing")

    def usage(self: _Listings[Any, Any]) -> Usage:
        """This month's usage of the API key: requests and tokens per model, the monthly token
        quota and when it resets (``GET /api/v1/usage``).

        Raises:
            APIStatusError: The server refused the request.
            APIConnectionError: The server could not be reached.
        """
        from composo._platform_types import USAGE_PATH, Usage

        usage: Usage = self._get(USAGE_PATH, Usage, "usage")
        return usage

    def rate_limits(self) -> RateLimits | None:
        """The rate limit the server declares for this API key, read from the
        ``X-RateLimit-*`` headers of its answers (asking for :meth:`usage` when no answer has
        carried them yet); ``None`` when the server declares none. The client paces itself to
        this quota from the first answer that declares it.
        """
        if self._throttle.declared() is None:
            self.usage()
        return self._throttle.declared()

    def get_trace(self: _Listings[Any, Any], trace_id: Any) -> TraceRecord:
        """One trace by its UUID (``GET /api/v1/traces/{trace_id}``).

        Raises:
            ComposoValidationError: ``trace_id`` is not a UUID, before any request.
            NotFoundError: No such trace for this API key.
        """
        from composo._platform import trace_path
        from composo._platform_types import TraceRecord

        trace: TraceRecord = self._get(trace_path(trace_id), TraceRecord, "trace")
        return trace


class AsyncPlatformMethods(_Listings["AsyncEvaluationHistory", "AsyncTraceListing"]):
    """Mixed into :class:`~composo.AsyncComposo`: the same methods, awaited (the shared bodies
    run on the awaited answer); the listings are async iterables."""

    _listings = ("AsyncEvaluationHistory", "AsyncTraceListing")

    async def _get(self, path: str, model: type[Any], what: str) -> Any:
        from composo._platform import parse

        return parse(model, await self._platform("GET", path, None, None), what)

    usage = awaited(PlatformMethods.usage)
    """As :meth:`Composo.usage`, awaited."""

    async def rate_limits(self) -> RateLimits | None:
        """As :meth:`Composo.rate_limits`, awaited."""
        if self._throttle.declared() is None:
            await self.usage()
        return self._throttle.declared()

    get_trace = awaited(PlatformMethods.get_trace)
    """As :meth:`Composo.get_trace`, awaited."""
