"""What :class:`~composo.Composo` and :class:`~composo.AsyncComposo` share above the core: their
own transport's settings, ``evaluate_dataframe`` and ``from_client`` (the API key passes from
client to client here and is read nowhere else).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
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
    from composo._core.options import EvaluateOptions


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
    """The core's :class:`Settings` among a face constructor's ``locals()``."""
    names = Settings.__annotations__
    return cast("Settings", {k: v for k, v in arguments.items() if k in names})


def settings_of(holder: object, api_key: str) -> dict[str, Any]:
    """The :class:`ClientSettings` ``holder`` keeps as attributes, with ``api_key``."""
    names = [name for name in ClientSettings.__annotations__ if hasattr(holder, name)]
    return {**{name: getattr(holder, name) for name in names}, "api_key": api_key}


def check_client(client: object) -> None:
    """Refuse anything but a :class:`~composo.Composo` or :class:`~composo.AsyncComposo`."""
    if not isinstance(client, Siblings):
        kind = type(client).__name__
        raise ComposoValidationError(
            f"client: expected a composo.Composo or composo.AsyncComposo, got {kind}"
        )


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
        """Keep the face's own settings; what makes its transport (none with an ``http_client``)."""
        settings = network(*network_settings, http_client)
        self.cache = cache = open_cache(cache, http_client)
        self.proxy, self.verify, self.trust_env = network_settings
        if settings is None:
            return None
        return functools.partial(make, max(connections, 10), settings, cache)

    def _own_kind(self) -> dict[str, Any]:
        """What only a client of the same kind can take over (``http_client``...)."""
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
        check_client(client)
        settings = client._settings(same_kind=type(client) is cls)
        settings.update(changes)
        maker: Any = cls
        out: Self = maker(**settings)
        return out

    def evaluate_dataframe(
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
        """Score every row of a pandas or polars DataFrame or a Hugging Face ``Dataset``.

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
            A new table of the same kind (awaited, on ``AsyncComposo``), in the input's row
            order: the input's columns, then ``<name>_score`` and ``<name>_explanation`` per
            criterion and an ``error`` column (``None`` where every criterion was scored).

        Raises:
            ComposoValidationError: A missing or misnamed column, or unusable criteria or
                options, before any request (a bad cell fails only its own row).
        """
        from composo._data.frames import evaluate_frame

        arguments = (df, criteria, evaluator_name, columns, concurrency, progress, options)
        return evaluate_frame(self, *arguments)
