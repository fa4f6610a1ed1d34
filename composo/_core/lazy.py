"""``lazy_exports``: a module's public names, imported on first use.

Packages whose names pull in heavy or optional imports (``composo`` itself, ``composo.tracing``,
``composo.ext``, the integration packages) list where each name lives and let the first
attribute access import it, so importing the package itself costs next to nothing.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    module: str, where: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of a module whose names load on first use.

    Use at the end of the module: ``__getattr__, __dir__ = lazy_exports(__name__, {...})``.

    Args:
        module: The module's ``__name__``.
        where: Each lazily loaded name -> the module defining it (absolute, or relative to
            ``module`` with a leading dot), or ``"module:attribute"`` when it is defined there
            under another name.

    Returns:
        The two functions; a loaded name is cached in the module, so later reads are plain.
    """
    namespace = sys.modules[module].__dict__
    package = module if hasattr(sys.modules[module], "__path__") else module.rpartition(".")[0]

    def __getattr__(name: str) -> Any:
        source = where.get(name)
        if source is None:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        source, _, attribute = source.partition(":")
        value = getattr(importlib.import_module(source, package), attribute or name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *where})

    return __getattr__, __dir__
