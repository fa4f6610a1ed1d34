"""``from_client``: a new client made with another's settings, of either kind, shared by
:class:`~composo.Composo` and :class:`~composo.AsyncComposo`.

Integrations that are handed one kind of client and need the other (a LlamaIndex evaluator
given an ``AsyncComposo`` and called synchronously), and users who want the same client with
one setting changed, make it here; the API key passes from client to client in this module
and is never read anywhere else.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar, cast

from composo._cache import CacheOption, open_cache
from composo._core.base_client import Settings
from composo._core.network import ProxyOption, VerifyOption
from composo._transport import network
from composo.errors import ComposoValidationError

if TYPE_CHECKING:
    from typing_extensions import Self, Unpack

    from composo._cache import ResultCache
    from composo._core.network import Network

__all__ = ["ClientSettings", "Siblings", "core_settings", "settings_of"]


T = TypeVar("T")


class ClientSettings(Settings, total=False):
    """The constructor keywords both clients take, which a client made by ``from_client``
    copies (``http_client`` and ``permits`` are of one kind of client and are not here)."""

    api_key: str | None
    cache: CacheOption
    proxy: ProxyOption
    verify: VerifyOption
    trust_env: bool


def core_settings(arguments: dict[str, Any]) -> Settings:
    """The core's :class:`Settings` among a face constructor's ``locals()``: the parameters of
    the same names, passed down unchanged (named once, in ``Settings``)."""
    names = Settings.__annotations__
    return cast("Settings", {k: v for k, v in arguments.items() if k in names})


def settings_of(holder: object, api_key: str) -> dict[str, Any]:
    """The :class:`ClientSettings` that ``holder`` (a client, or what makes one) keeps as
    attributes of the same names, with ``api_key``."""
    names = [name for name in ClientSettings.__annotations__ if hasattr(holder, name)]
    return {**{name: getattr(holder, name) for name in names}, "api_key": api_key}


class Siblings:
    """Mixed into both faces: what they make alike (their settings, their own transport)."""

    _api_key: str  # set by the core client

    def _own_connections(
        self,
        http_client: object,
        cache: CacheOption,
        network_settings: tuple[ProxyOption, VerifyOption, bool],
        connections: int,
        make: Callable[[int, Network, ResultCache | None], T],
    ) -> Callable[[], T] | None:
        """Keep the face's own settings (``cache``, ``proxy``, ``verify``, ``trust_env``) and
        return what makes its own transport: ``make`` over them (``None`` with an
        ``http_client``, which has its own)."""
        settings = network(*network_settings, http_client)
        self.cache = cache = open_cache(cache, http_client)
        self.proxy, self.verify, self.trust_env = network_settings
        if settings is None:
            return None
        return functools.partial(make, max(connections, 10), settings, cache)

    def _own_kind(self) -> dict[str, Any]:
        """What only a client of the same kind can take over (a supplied ``http_client``...)."""
        return {}

    def _settings(self, same_kind: bool) -> dict[str, Any]:
        return {**settings_of(self, self._api_key), **(self._own_kind() if same_kind else {})}

    @classmethod
    def from_client(cls, client: Siblings, **changes: Unpack[ClientSettings]) -> Self:
        """A new client of this class with the settings of ``client`` (a ``Composo`` or an
        ``AsyncComposo``: key, URL, retries, model core, timeout, concurrency, pace, cache,
        proxy and CA settings), except ``changes``.

        It has its own connections and pace, and is closed on its own. A supplied
        ``http_client`` (and ``Composo``'s ``permits``) come along only when ``client`` is of
        this same class; for the other kind the new client makes its own connections with
        ``client``'s ``proxy``, ``verify`` and ``trust_env``.

        Args:
            client: The client whose settings to copy.
            **changes: Constructor keywords to set differently (``timeout=120``...).

        Raises:
            ComposoValidationError: ``client`` is not a Composo client, or a change is unusable.
        """
        if not isinstance(client, Siblings):
            raise ComposoValidationError(
                "client: expected a composo.Composo or composo.AsyncComposo, "
                f"got {type(client).__name__}"
            )
        settings = client._settings(same_kind=type(client) is cls)
        settings.update(changes)
        maker: Any = cls
        out: Self = maker(**settings)
        return out
