"""What the faces hand down to the core: their own connections
(:mod:`composo._core.connections`), with the result cache over them (:mod:`composo._cache`); the
core calls what is handed to it and knows nothing of either.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar

from composo._core.connections import Connections
from composo._core.network import Network, ProxyOption, VerifyOption
from composo.errors import ComposoValidationError

if TYPE_CHECKING:
    import httpx

    from composo._cache import ResultCache

T = TypeVar("T")


def network(
    proxy: ProxyOption, verify: VerifyOption, trust_env: bool, http_client: object
) -> Network | None:
    """The settings of a client's own connections, checked now (the environment's proxies are
    read now, as httpx reads them when a client is made); ``None`` when an ``http_client`` is
    given, which brings its own (and then none may be set here)."""
    if http_client is None:
        return Network(proxy, verify, trust_env)
    given = [
        name
        for name, value, default in (
            ("proxy", proxy, None),
            ("verify", verify, True),
            ("trust_env", trust_env, True),
        )
        if value is not default
    ]
    if given:
        raise ComposoValidationError(
            f"{given[0]}: cannot be combined with http_client (that client has its own); set "
            f"{given[0]}= on your httpx client instead, or drop http_client"
        )
    return None


def sync_transport(
    connections: int, settings: Network, cache: ResultCache | None
) -> httpx.BaseTransport:
    """Connections on ``settings``, with the result cache over them when there is one."""
    return _cached(Connections(connections, network=settings), cache, "CachingTransport")


def async_transport(
    connections: int, settings: Network, cache: ResultCache | None
) -> httpx.AsyncBaseTransport:
    """As :func:`sync_transport`, for the async client (made once per event loop)."""
    from composo._core.connections import AsyncShards

    return _cached(AsyncShards(connections, network=settings), cache, "AsyncCachingTransport")


def _cached(transport: T, cache: ResultCache | None, kind: str) -> T:
    """``transport``, under the result cache's transport of that ``kind`` when there is a cache
    (:mod:`composo._cache` loads only then)."""
    if cache is None:
        return transport
    import composo._cache as caching

    cached: T = getattr(caching, kind)(transport, cache)
    return cached
