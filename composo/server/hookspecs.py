"""The server's own hook, declared by the server (the core knows nothing of judges). The package's
``composo`` entry point loads this module, so the hook is declared before installed judge plugins
are checked; it imports only the core's marker."""

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
