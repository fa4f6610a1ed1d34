"""``lazy_exports``: a package's public names imported on first use, so importing the package
(``composo``, ``composo.tracing``, the integrations) costs next to nothing."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(
    module: str, where: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__, __dir__ = lazy_exports(__name__, {name: "module" or "module:attr"})``
    (a module may be relative, with a leading dot; ``".name"`` gives the submodule ``name``
    itself); a loaded name is cached in the module."""
    namespace = sys.modules[module].__dict__
    package = module if hasattr(sys.modules[module], "__path__") else module.rpartition(".")[0]

    def __getattr__(name: str) -> Any:
        source = where.get(name)
        if source is None:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        source, _, attribute = source.partition(":")
        found = importlib.import_module(source, package)
        value = found if source == f".{name}" else getattr(found, attribute or name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *where})

    return __getattr__, __dir__
