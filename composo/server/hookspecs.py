"""The server's own hook (the core knows nothing of judges), loaded by the package's ``composo``
entry point so it is declared before installed judge plugins are checked."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from composo._core.hookspecs import hookspec
from composo._core.plugins import add_hookspecs


class Hookspecs:
    """The hook a judge plugin implements."""

    @hookspec
    def composo_judges(self) -> Mapping[str, Callable[..., Any]] | None:
        """Judges for the local server: name -> factory (see ``composo.server.judges``)."""


add_hookspecs(Hookspecs)
