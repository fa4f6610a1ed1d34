"""What the faces hand down to the core: their own connections with the result cache over them;
the core calls what is handed to it and knows nothing of either."""

from __future__ import annotations

from typing import TYPE_CHECKING

from composo._cache import AsyncCachingTransport, CachingTransport, ResultCache
from composo._core.connections import AsyncShards, Connections
from composo._core.network import Network, ProxyOption, VerifyOption
from composo.errors import ComposoValidationError

if TYPE_CHECKING:
    import httpx


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
    inner = Connections(connections, network=settings)
    return inner if cache is None else CachingTransport(inner, cache)


def async_transport(
    connections: int, settings: Network, cache: ResultCache | None
) -> httpx.AsyncBaseTransport:
    """As :func:`sync_transport`, for the async client (made once per event loop)."""
    inner = AsyncShards(connections, network=settings)
    return inner if cache is None else AsyncCachingTransport(inner, cache)
