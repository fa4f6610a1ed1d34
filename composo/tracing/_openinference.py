"""The plugin offering every installed OpenInference instrumentor (entry-point group
``openinference_instrumentor``) as an instrument of that name; names a Composo integration
provides (LangChain, LlamaIndex) are left to it. Nothing is imported until an instrument is used.
"""

from __future__ import annotations

import importlib.metadata
import threading

from composo._core.plugins import hookimpl
from composo.tracing._instruments import (
    ENTRY_POINT_GROUP,
    EntryPointInstrument,
    Instrument,
    attribute_name,
    member_instrument,
    plugin_provided,
)

__all__ = ["composo_instruments"]

_found: list[Instrument] | None = None
_lock = threading.Lock()


@hookimpl
def composo_instruments() -> list[Instrument]:
    """One instrument per installed OpenInference instrumentor (the same instances each time, so
    ``ComposoTracer.init`` recognises one already switched on)."""
    global _found
    with _lock:
        if _found is None:
            skip = plugin_provided()
            seen: dict[str, Instrument] = {}
            for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
                key = attribute_name(ep.name)
                if key in skip or key in seen:
                    continue
                dist = ep.dist.name if ep.dist is not None else ep.value
                seen[key] = member_instrument(key) or EntryPointInstrument(ep.name, ep.value, dist)
            _found = list(seen.values())
        return list(_found)
