"""The async client users import: the core's client plus what sits above the core, the
result cache (:mod:`composo._cache`, an httpx transport over the connections) and tables
(:mod:`composo._data`). The core never imports this module."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import httpx

from composo._cache import AsyncCachingTransport, CacheOption, open_cache
from composo._core.async_client import AsyncClient
from composo._core.limits import (
    DEFAULT_MAX_CONCURRENT_REQUESTS,
    DEFAULT_NUM_RETRIES,
    DEFAULT_TIMEOUT,
)

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from composo._core.options import EvaluateOptions

__all__ = ["AsyncComposo"]


class AsyncComposo(AsyncClient):
    """The async client: at most ``max_concurrent_requests`` requests in flight across all calls.

    Args:
        api_key: The Composo API key (default: ``COMPOSO_API_KEY``).
        base_url: The API's base URL (default: ``COMPOSO_BASE_URL``, else the platform's).
        num_retries: Retries after the first attempt, at least 1.
        model_core: The default model core for every call.
        timeout: Seconds one call may take: connecting, sending, every read of the answer,
            retries and waits included, however slowly the server sends.
        max_concurrent_requests: Requests in flight at once (the platform advises about 5).
        http_client: An ``httpx.AsyncClient`` to use; it is not closed by :meth:`aclose`.
        cache: As for :class:`Composo`: ``True``, a path or a ``ResultCache`` answers repeated
            requests from disk.
        requests_per_minute: Pace requests to this rate from the start (a plan's known quota);
            ``None`` paces only once the server throttles.

    Raises:
        ComposoValidationError: A setting is unusable.
    """

    def __init__(
        self,
        api_key: str | None = None,
        base_url: str | None = None,
        num_retries: int = DEFAULT_NUM_RETRIES,
        model_core: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        max_concurrent_requests: int = DEFAULT_MAX_CONCURRENT_REQUESTS,
        http_client: httpx.AsyncClient | None = None,
        cache: CacheOption = None,
        requests_per_minute: float | None = None,
    ) -> None:
        super().__init__(
            api_key,
            base_url,
            num_retries,
            model_core,
            timeout,
            max_concurrent_requests,
            http_client,
            requests_per_minute,
        )
        self.cache = open_cache(cache, http_client)

    def _wrap(self, transport: httpx.AsyncBaseTransport) -> httpx.AsyncBaseTransport:
        return transport if self.cache is None else AsyncCachingTransport(transport, self.cache)

    async def evaluate_dataframe(
        self,
        df: Any,
        criteria: str | Sequence[str] | Mapping[str, str] | None = None,
        *,
        columns: Mapping[str, str] | None = None,
        evaluator_name: str | Sequence[str] | Mapping[str, str] | None = None,
        concurrency: int | None = None,
        progress: bool | Callable[[int, int | None], None] = False,
        **options: Unpack[EvaluateOptions],
    ) -> Any:
        """Score every row of a table (as :meth:`Composo.evaluate_dataframe`, awaited).

        Args:
            df: The table. Rows are read by column name: a ``messages`` column (message dicts,
                or their JSON text), or ``question`` and ``answer`` columns (with an optional
                ``context``); optional ``system``, ``tools``, ``id`` and ``tags`` columns.
            criteria: A criterion, a list, or ``{name: criterion}`` (the names prefix the
                result columns; otherwise a short form of each criterion does).
            columns: Role -> your column's name where they differ, e.g.
                ``{"question": "prompt", "answer": "response"}``.
            evaluator_name: Saved evaluator name(s) (or ``{name: evaluator}``), instead of
                ``criteria``.
            concurrency: Requests in flight (at most ``max_concurrent_requests``).
            progress: ``True`` for a bar, or a ``(done, total)`` callable.
            **options: :class:`~composo.types.EvaluateOptions` for every row.

        Returns:
            A new table of the same kind, in the input's row order: the input's columns, then
            ``<name>_score`` and ``<name>_explanation`` per criterion and an ``error`` column
            (``None`` where every criterion was scored).

        Raises:
            ComposoValidationError: A missing or misnamed column, or unusable criteria or
                options, before any request (a bad cell fails only its own row).
        """
        from composo._data.frames import aevaluate_frame

        return await aevaluate_frame(
            self, df, criteria, evaluator_name, columns, concurrency, progress, options
        )
