"""The server's own hook, declared by the server (the core knows nothing of judges). Imports only
the core's marker, so the plugin manager can load it by name before checking plugins."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from composo._core.hookspecs import hookspec


@hookspec
def composo_judges() -> Mapping[str, Callable[..., Any]] | None:
    """Judges for the local server: name -> factory (see ``composo.server.judges``)."""
