"""The platform SDK's ``composo.client``, so code written for it imports unchanged: the same
:class:`~composo.Composo` and :class:`~composo.AsyncComposo` as ``composo`` gives (import them
from there in new code). Each loads on first use, as from ``composo``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from composo._lazy import lazy_exports

if TYPE_CHECKING:
    from composo._async_client import AsyncComposo
    from composo._client import Composo

__all__ = ["AsyncComposo", "Composo"]

__getattr__, __dir__ = lazy_exports(
    __name__, {"Composo": "composo._client", "AsyncComposo": "composo._async_client"}
)
