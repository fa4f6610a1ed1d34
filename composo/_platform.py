"""What both clients share for the account and history API: argument checks, requests, answer
parsing, lazy paging and history rows. The clients add only the I/O (a function that sends one
request and returns the decoded JSON answer).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from datetime import datetime, timezone
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ValidationError

from composo._platform_types import (
    EVALUATIONS_FILTER_PATH,
    TRACES_MAX_PAGE_SIZE,
    TRACES_PATH,
    EvaluationFilterRequest,
    EvaluationPage,
    EvaluationRecord,
    TracePage,
    TraceRecord,
)
from composo.errors import ComposoValidationError, UnexpectedResponseError

ROW_COLUMNS = (
    "id",
    "created_at",
    "criterion",
    "score",
    "tags",
    "model",
    "endpoint",
    "status_code",
    "latency_ms",
    "token_count",
)
"""The columns of :func:`history_row`, in order."""


M = TypeVar("M", bound=BaseModel)


def parse(model: type[M], data: Any, what: str) -> M:
    """``data`` validated as ``model``; an answer of another shape is the server's fault."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise UnexpectedResponseError(
            f"the {what} answer is not in the shape the platform documents: {exc.errors()[0]}"
        ) from None


# -- evaluation history --------------------------------------------------------------------------


def evaluation_filter(
    tags: Mapping[str, str | Sequence[str]] | None = None,
    criteria: str | Sequence[str] | None = None,
    endpoint: str | None = None,
    page_size: int | None = None,
) -> EvaluationFilterRequest:
    """The filter body for ``list_evaluations``' arguments, checked before any request: a tag
    matches one value or any of a list; ``criteria`` one criterion or any of a list."""
    filters = None if tags is None else _tag_filters(tags)
    criteria_filter = None if criteria is None else _criteria_filter(criteria)
    if endpoint is not None and endpoint not in ("reward", "trace"):
        raise ComposoValidationError(f"endpoint: expected 'reward' or 'trace', got {endpoint!r}")
    _check_page_size(page_size)
    return EvaluationFilterRequest.model_validate(
        {
            "filters": filters,
            "criteria_filter": criteria_filter,
            "endpoint_type": endpoint,
            "page_size": page_size,
        }
    )


def _tag_filters(tags: object) -> list[dict[str, Any]]:
    if not isinstance(tags, Mapping):
        raise ComposoValidationError(
            f"tags: expected a dict such as {{'run': 'nightly'}}, got {type(tags).__name__}"
        )
    return [_tag_filter(key, value) for key, value in tags.items()]


def _tag_filter(key: object, value: object) -> dict[str, Any]:
    if not isinstance(key, str) or not key:
        raise ComposoValidationError(f"tags: {key!r} is not a tag name (a non-empty string)")
    values = [value] if isinstance(value, str) else value
    if (
        not isinstance(values, Sequence)
        or not values
        or not all(isinstance(v, str) for v in values)
    ):
        raise ComposoValidationError(
            f"tags[{key!r}]: expected a string or a non-empty list of strings, got {value!r}"
        )
    return {"key": key, "values": list(values)}


def _criteria_filter(criteria: str | Sequence[str]) -> dict[str, list[str]]:
    values = [criteria] if isinstance(criteria, str) else list(criteria)
    if not values or not all(isinstance(c, str) and c for c in values):
        raise ComposoValidationError(
            "criteria: expected a criterion or a non-empty list of criteria (strings)"
        )
    return {"values": values}


def _check_page_size(page_size: object, most: int | None = None) -> None:
    if page_size is None:
        return
    if (
        isinstance(page_size, bool)
        or not isinstance(page_size, int)
        or not 1 <= page_size <= (most or page_size)
    ):
        expected = "a positive integer" if most is None else f"an integer from 1 to {most}"
        raise ComposoValidationError(f"page_size: expected {expected}, got {page_size!r}")


Request = tuple[str, str, Mapping[str, str] | None, Any]


PageT = TypeVar("PageT")
ItemT = TypeVar("ItemT")


class _Listing(Generic[PageT, ItemT]):
    """A listing's pages, fetched as iteration reaches them; iterating again asks again.
    ``send(method, path, params, json_body)`` returns the decoded answer (awaitable when async)."""

    _items: str  # the field of a page that holds the listing's items

    def __init__(self, send: Callable[..., Any], query: Any) -> None:
        self._send = send
        self.query = query

    def _first(self) -> Request:
        raise NotImplementedError

    def _take(self, data: Any, asked: Request) -> tuple[PageT, Request | None]:
        """The page in the answer to ``asked``, and the next page's request (``None``: last)."""
        raise NotImplementedError


class _Evaluations(_Listing[EvaluationPage, EvaluationRecord]):
    """Pages of the evaluations filter are numbered; the last is ``total_pages`` (or empty)."""

    _items = "evaluations"

    def _first(self) -> Request:
        return self._ask(self.query.page or 1)

    def _ask(self, number: int) -> Request:
        body = self.query.model_copy(update={"page": number}).model_dump(exclude_none=True)
        return ("POST", EVALUATIONS_FILTER_PATH, None, body)

    def _take(self, data: Any, asked: Request) -> tuple[EvaluationPage, Request | None]:
        page: EvaluationPage = parse(EvaluationPage, data, "evaluations filter")
        last = not page.evaluations or page.page >= page.total_pages
        return page, None if last else self._ask(asked[3]["page"] + 1)


class _Traces(_Listing[TracePage, TraceRecord]):
    """The next page of traces is the one the last page's ``next_page_token`` names."""

    _items = "traces"

    def _first(self) -> Request:
        return ("GET", TRACES_PATH, self.query, None)

    def _take(self, data: Any, asked: Request) -> tuple[TracePage, Request | None]:
        page: TracePage = parse(TracePage, data, "traces")
        token = page.next_page_token
        if not (token and page.traces):
            return page, None
        return page, ("GET", TRACES_PATH, {**self.query, "page_token": token}, None)


class _SyncListing(_Listing[PageT, ItemT]):
    def pages(self) -> Iterator[PageT]:
        request: Request | None = self._first()
        while request is not None:
            page, request = self._take(self._send(*request), request)
            yield page

    def __iter__(self) -> Iterator[ItemT]:
        for page in self.pages():
            yield from getattr(page, self._items)


class _AsyncListing(_Listing[PageT, ItemT]):
    async def pages(self) -> AsyncIterator[PageT]:
        request: Request | None = self._first()
        while request is not None:
            page, request = self._take(await self._send(*request), request)
            yield page

    async def __aiter__(self) -> AsyncIterator[ItemT]:
        async for page in self.pages():
            for item in getattr(page, self._items):
                yield item


def history_row(record: EvaluationRecord) -> dict[str, Any]:
    """One evaluation as a flat row (:data:`ROW_COLUMNS`)."""
    row = {c: getattr(record, "model_core" if c == "model" else c) for c in ROW_COLUMNS}
    return {**row, "tags": dict(record.tags)}


def _pandas(rows: list[dict[str, Any]]) -> Any:
    try:
        import pandas as pd
    except ImportError:
        raise ImportError("to_pandas() needs pandas: pip install 'composo[pandas]'") from None
    return pd.DataFrame(rows, columns=list(ROW_COLUMNS))


def _polars(rows: list[dict[str, Any]]) -> Any:
    try:
        import polars as pl
    except ImportError:
        raise ImportError("to_polars() needs polars: pip install 'composo[polars]'") from None
    if not rows:
        return pl.DataFrame(schema=list(ROW_COLUMNS))
    return pl.DataFrame(rows, infer_schema_length=None).select(list(ROW_COLUMNS))


class EvaluationHistory(_Evaluations, _SyncListing[EvaluationPage, EvaluationRecord]):
    """Past evaluations, in the platform's order (newest first), fetched a page at a time as
    iteration reaches it. Iterating again asks the platform again."""

    def to_rows(self) -> list[dict[str, Any]]:
        """Every matching evaluation as a row of :data:`ROW_COLUMNS`."""
        return [history_row(r) for r in self]

    def to_pandas(self) -> Any:
        """A pandas DataFrame, one row per evaluation (``pip install 'composo[pandas]'``)."""
        return _pandas(self.to_rows())

    def to_polars(self) -> Any:
        """A polars DataFrame, one row per evaluation (``pip install 'composo[polars]'``)."""
        return _polars(self.to_rows())


class AsyncEvaluationHistory(_Evaluations, _AsyncListing[EvaluationPage, EvaluationRecord]):
    """:class:`EvaluationHistory` for ``async for``; the conversions are coroutines."""

    async def to_rows(self) -> list[dict[str, Any]]:
        return [history_row(r) async for r in self]

    async def to_pandas(self) -> Any:
        return _pandas(await self.to_rows())

    async def to_polars(self) -> Any:
        return _polars(await self.to_rows())


# -- traces --------------------------------------------------------------------------------------


def _iso(value: datetime | str, name: str) -> str:
    if isinstance(value, str):
        try:
            datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            raise ComposoValidationError(
                f"{name}: {value!r} is not an ISO date-time; pass a datetime or a string "
                "like '2025-01-31T12:00:00Z'"
            ) from None
        return value
    if not isinstance(value, datetime):
        raise ComposoValidationError(f"{name}: expected a datetime, got {type(value).__name__}")
    return (value if value.tzinfo is not None else value.replace(tzinfo=timezone.utc)).isoformat()


def trace_params(
    page_size: int | None = None,
    start_date: datetime | str | None = None,
    end_date: datetime | str | None = None,
) -> dict[str, str]:
    """The query of ``GET /api/v1/traces`` (only what is set), checked before any request."""
    _check_page_size(page_size, TRACES_MAX_PAGE_SIZE)
    params = {} if page_size is None else {"page_size": str(page_size)}
    for name, value in (("start_date", start_date), ("end_date", end_date)):
        if value is not None:
            params[name] = _iso(value, name)
    return params


def trace_path(trace_id: object) -> str:
    """``/api/v1/traces/{trace_id}`` for a UUID (or its text), checked before any request."""
    try:
        canonical = trace_id if isinstance(trace_id, uuid.UUID) else uuid.UUID(str(trace_id))
    except ValueError:
        raise ComposoValidationError(
            f"trace_id: {str(trace_id)[:64]!r} is not a UUID (traces are named by UUID)"
        ) from None
    return f"{TRACES_PATH}/{canonical}"


class TraceListing(_Traces, _SyncListing[TracePage, TraceRecord]):
    """Traces, fetched a page at a time (following the platform's ``next_page_token``)."""


class AsyncTraceListing(_Traces, _AsyncListing[TracePage, TraceRecord]):
    """:class:`TraceListing` for ``async for``."""
