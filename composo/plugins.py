"""The plugin manager: built-in adapters and installed plugins are found and asked the same way."""

from __future__ import annotations

import importlib
import logging
import threading

import pluggy

from composo import hookspecs

__all__ = ["BUILTIN_PLUGINS", "ENTRY_POINT_GROUP", "get_plugin_manager", "hookimpl"]

ENTRY_POINT_GROUP = "composo"
hookimpl = pluggy.HookimplMarker("composo")

# name -> module; each module holds hook implementations only and imports nothing optional.
BUILTIN_PLUGINS: dict[str, str] = {
    "composo.basic": "composo.adapters.basic",
    "composo.openai_chat": "composo.adapters.openai_chat",
    "composo.openai_responses": "composo.adapters.openai_responses",
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
                loaded = pm.load_setuptools_entrypoints(ENTRY_POINT_GROUP)
                if loaded:
                    _log.debug("loaded %d composo plugin(s) from entry points", loaded)
                pm.check_pending()
                _manager = pm
    return _manager
