"""The async client users import, as :mod:`composo._client` makes the blocking one."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import httpx

from composo._cache import CacheOption
from composo._core import limits
from composo._core.async_client import AsyncClient
from composo._core.base_client import awaited
from composo._platform_methods import AsyncPlatformMethods
from composo._siblings import Siblings, core_settings
from composo._transport import async_transport

if TYPE_CHECKING:
    from composo._core.network import ProxyOption, VerifyOption


class AsyncComposo(Siblings, AsyncPlatformMethods, AsyncClient):
    """The async client: at most ``max_concurrent_requests`` requests in flight across all calls.

    The first six arguments may be given by position, in the order of the platform's own SDK;
    the others by name. Each means what it does for :class:`Composo`.

    Args:
        api_key: The Composo API key (default: ``COMPOSO_API_KEY``).
        base_url: The API's base URL (default: ``COMPOSO_BASE_URL``, else the platform's).
        num_retries: Retries after the first attempt, at least 1.
        model_core: The default model core for every call.
        max_concurrent_requests: Requests in flight at once (the platform advises about 5).
        timeout: Seconds one call may take, from connecting to the last read, retries included.
        http_client: An ``httpx.AsyncClient`` to use; it is not closed by :meth:`aclose`.
        cache: ``True``, a path or a ``ResultCache``: repeated requests answered from disk.
        requests_per_minute: Pace requests to this rate from the start (``None``: once throttled).
        proxy: Every request through this proxy (default: the environment's).
        verify: The CA bundle (a path or ``ssl.SSLContext``), or ``False``.
        trust_env: ``False`` ignores the proxy and CA bundle variables of the environment.

    Raises:
        ComposoValidationError: A setting is unusable, before any request.

    ``AsyncComposo.from_client(client)`` makes an async client with the settings of ``client``
    (a ``Composo`` too), except those given.
    """

    def __init__(
        self,
        api_key: str | None = None,
        base_url: str | None = None,
        num_retries: int = limits.DEFAULT_NUM_RETRIES,
        model_core: str | None = None,
        max_concurrent_requests: int = limits.DEFAULT_MAX_CONCURRENT_REQUESTS,
        timeout: float = limits.DEFAULT_TIMEOUT,
        *,
        http_client: httpx.AsyncClient | None = None,
        cache: CacheOption = None,
        requests_per_minute: float | None = None,
        proxy: ProxyOption = None,
        verify: VerifyOption = True,
        trust_env: bool = True,
    ) -> None:
        settings = core_settings(locals())
        transport = self._own_connections(
            http_client, cache, (proxy, verify, trust_env), max_concurrent_requests, async_transport
        )
        super().__init__(api_key, http_client=http_client, transport=transport, **settings)

    def _own_kind(self) -> dict[str, Any]:
        return {"http_client": None if self._owns_http else self._http}

    evaluate_dataframe = awaited(Siblings.evaluate_dataframe)
    """As :meth:`Composo.evaluate_dataframe`, awaited."""
