"""The plugin manager: built-in adapters and installed plugins are found and asked the same way."""

from __future__ import annotations

import importlib
import logging
import threading

import pluggy

from composo._core import hookspecs

__all__ = ["BUILTIN_PLUGINS", "ENTRY_POINT_GROUP", "get_plugin_manager", "hookimpl"]

ENTRY_POINT_GROUP = "composo"
hookimpl = pluggy.HookimplMarker("composo")

# name -> module; each module holds hook implementations only and imports nothing optional.
BUILTIN_PLUGINS: dict[str, str] = {
    "composo.basic": "composo._core.adapters.basic",
    "composo.openai_chat": "composo._core.adapters.openai_chat",
    "composo.openai_responses": "composo._core.adapters.openai_responses",
    "composo.anthropic": "composo._core.adapters.anthropic",
}

_log = logging.getLogger("composo")
_manager: pluggy.PluginManager | None = None
_lock = threading.Lock()


def get_plugin_manager() -> pluggy.PluginManager:
    """The process-wide manager, built on first use (never at import: entry points cost time)."""
    global _manager
    if _manager is None:
        with _lock:
            if _manager is None:
                pm = pluggy.PluginManager("composo")
                pm.add_hookspecs(hookspecs)
                for name, module in BUILTIN_PLUGINS.items():
                    pm.register(importlib.import_module(module), name=name)
                _load_entry_points(pm)
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
