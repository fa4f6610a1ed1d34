"""For plugin authors: mark hook implementations with :data:`hookimpl` and read the hook
specifications in :mod:`composo.plugins.hookspecs`.

A plugin is any object or module with ``composo_*`` functions marked ``@hookimpl``, exposed under
the ``composo`` entry-point group (or registered with ``get_plugin_manager().register(obj)``).
A package that declares hooks of its own passes their specifications to :func:`add_hookspecs`.
"""

from __future__ import annotations

from composo._core import hookspecs
from composo._core.hookspecs import hookspec
from composo._core.plugins import (
    BUILTIN_PLUGINS,
    ENTRY_POINT_GROUP,
    add_hookspecs,
    get_plugin_manager,
    hookimpl,
)

__all__ = [
    "BUILTIN_PLUGINS",
    "ENTRY_POINT_GROUP",
    "add_hookspecs",
    "get_plugin_manager",
    "hookimpl",
    "hookspec",
    "hookspecs",
]
