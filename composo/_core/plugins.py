"""The plugin manager: built-in adapters and installed plugins are found and asked the same way."""

from __future__ import annotations

import importlib
import logging
import threading
from types import ModuleType

import pluggy

from composo._core import hookspecs

# The public names are composo.plugins's (its __all__ lists them).
ENTRY_POINT_GROUP = "composo"
hookimpl = pluggy.HookimplMarker("composo")

# The package's own plugins, named as entry points are (nothing here imports them): each module
# holds hook implementations only and imports nothing optional.
BUILTIN_PLUGINS: dict[str, str] = {
    "composo.basic": "composo.adapters.basic",
    "composo.openai_chat": "composo.adapters.openai_chat",
    "composo.openai_responses": "composo.adapters.openai_responses",
    "composo.anthropic": "composo.adapters.anthropic",
    "composo.display": "composo._display",
}

_log = logging.getLogger("composo")
_manager: pluggy.PluginManager | None = None
_specs: list[ModuleType | type] = [hookspecs]
_lock = threading.RLock()  # a plugin imported while the manager is built may add its hooks


def add_hookspecs(module: ModuleType | type) -> None:
    """Declare the hooks of a package above the core (tracing's instruments, the server's
    judges); call it when that package is imported. Hooks whose specification comes later are
    checked when it comes (pluggy verifies the implementations already registered)."""
    with _lock:
        if module not in _specs:
            _specs.append(module)
            if _manager is not None:
                _manager.add_hookspecs(module)


def get_plugin_manager() -> pluggy.PluginManager:
    """The process-wide manager, built on first use (never at import: entry points cost time).
    Every hook a plugin implements must have a specification once the installed plugins are
    loaded: a misspelt hook is an error, not silence."""
    global _manager
    if _manager is None:
        with _lock:
            if _manager is None:
                pm = pluggy.PluginManager("composo")
                pm.add_hookspecs(hookspecs)
                for name, module in BUILTIN_PLUGINS.items():
                    pm.register(importlib.import_module(module), name=name)
                _load_entry_points(pm)
                for spec in _specs[1:]:
                    pm.add_hookspecs(spec)
                pm.check_pending()
                _manager = pm
    return _manager


def _load_entry_points(pm: pluggy.PluginManager) -> None:
    """Register installed plugins. One that fails to import is skipped with a warning, so a
    broken third-party package cannot take every evaluation down with it."""
    from importlib.metadata import entry_points

    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if pm.get_plugin(ep.name) is not None or pm.is_blocked(ep.name):
            continue
        try:
            plugin = ep.load()
        except Exception:
            _log.warning(
                "composo plugin %r (%s) failed to load and is skipped",
                ep.name,
                ep.value,
                exc_info=True,
            )
            continue
        pm.register(plugin, name=ep.name)
