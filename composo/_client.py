"""The blocking client users import: the core's client with what sits above the core (the cache,
tables, account methods); the core never imports this module."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import httpx

from composo._cache import CacheOption
from composo._core import limits
from composo._core.client import SyncClient
from composo._platform_methods import PlatformMethods
from composo._siblings import Siblings, core_settings
from composo._transport import sync_transport

if TYPE_CHECKING:
    from composo._core.network import ProxyOption, VerifyOption
    from composo._core.ratelimit import Permits


class Composo(Siblings, PlatformMethods, SyncClient):
    """Evaluate conversations and traces against plain-English criteria.

    The first five arguments may be given by position, in the order of the platform's own SDK;
    the others by name.

    Args:
        api_key: The Composo API key (default: the ``COMPOSO_API_KEY`` environment variable).
        base_url: The API's base URL (default: ``COMPOSO_BASE_URL``, else the platform's).
        num_retries: Retries after the first attempt (at least 1) for what may succeed on a
            second try: lost connections, timeouts, 408, 409, 429 and 5xx.
        model_core: The default model core for every call (a call's own ``model_core`` wins).
        timeout: Seconds one call may take: connecting (through a proxy too), sending, every
            read of the answer, retries and waits included, however slowly the server sends.
        max_concurrent_requests: Requests in flight at once across all calls.
        http_client: An ``httpx.Client`` to use (tests, custom transports); it is not closed by
            :meth:`close`, and its event hooks, auth, cookies, default headers, proxies and
            TLS settings apply (not the client's own ``proxy``, ``verify`` or ``cache``).
        cache: ``True`` keeps answers in the user's cache directory (a path: there; a
            :class:`~composo.ResultCache`: that one), so a repeated request is not sent again.
            Errors and ``data_retention="none"`` requests are never stored.
        requests_per_minute: Pace requests to this rate from the start (a plan's known quota);
            ``None`` paces only once the server throttles.
        proxy: Send every request through this proxy (``"http://user:pass@host:3128"``, an
            https or socks5 URL, or an ``httpx.Proxy``). Default: the environment's
            ``HTTPS_PROXY`` / ``HTTP_PROXY`` / ``ALL_PROXY``, except for ``NO_PROXY`` hosts.
        verify: ``True`` checks the server's certificate against the default CA bundle (or
            ``SSL_CERT_FILE`` / ``SSL_CERT_DIR``); a path to a CA bundle, or an
            ``ssl.SSLContext``; ``False`` only for a test server.
        trust_env: ``False`` ignores the proxy and CA bundle variables of the environment.
        permits: A request budget shared beyond this process (an object with blocking
            ``acquire()`` and ``release()``, such as :class:`composo.ray.RequestBudget`): each
            attempt holds one permit from before it is sent until its answer is read.

    Raises:
        ComposoValidationError: A setting is unusable (no API key, a bad URL, model core,
            proxy or CA bundle...), before any request.

    ``Composo.from_client(client, timeout=120)`` makes another client with ``client``'s
    settings (either kind), except those given.
    """

    def __init__(
        self,
        api_key: str | None = None,
        base_url: str | None = None,
        num_retries: int = limits.DEFAULT_NUM_RETRIES,
        model_core: str | None = None,
        timeout: float = limits.DEFAULT_TIMEOUT,
        *,
        max_concurrent_requests: int = limits.DEFAULT_MAX_CONCURRENT_REQUESTS,
        http_client: httpx.Client | None = None,
        cache: CacheOption = None,
        requests_per_minute: float | None = None,
        proxy: ProxyOption = None,
        verify: VerifyOption = True,
        trust_env: bool = True,
        permits: Permits | None = None,
    ) -> None:
        settings = core_settings(locals())
        transport = self._own_connections(
            http_client, cache, (proxy, verify, trust_env), max_concurrent_requests, sync_transport
        )
        self.permits = permits
        super().__init__(
            api_key, http_client=http_client, transport=transport, permits=permits, **settings
        )

    def _own_kind(self) -> dict[str, Any]:
        return {
            "http_client": None if self._owns_http else self._http_client,
            "permits": self.permits,
        }
