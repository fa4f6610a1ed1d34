"""The async client users import: the core's client plus what sits above the core, the
result cache (:mod:`composo._cache`), tables (:mod:`composo._data`) and the account and
history methods (:mod:`composo._platform_methods`). The core never imports this module."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import httpx

from composo._cache import AsyncCachingTransport, CacheOption, ResultCache, open_cache
from composo._core.async_client import AsyncClient
from composo._platform_methods import AsyncPlatformMethods

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from composo._core.options import EvaluateOptions

__all__ = ["AsyncComposo"]


class AsyncComposo(AsyncPlatformMethods, AsyncClient):
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

    def _open_cache(self, cache: CacheOption, http_client: object) -> ResultCache | None:
        return open_cache(cache, http_client)

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
        """As :meth:`Composo.evaluate_dataframe`, awaited."""
        from composo._data.frames import aevaluate_frame

        return await aevaluate_frame(
            self, df, criteria, evaluator_name, columns, concurrency, progress, options
        )
