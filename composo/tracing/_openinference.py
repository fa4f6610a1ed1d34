"""The plugin that makes every installed OpenInference instrumentor available to tracing.

OpenInference instrumentor packages announce themselves under the ``openinference_instrumentor``
entry-point group (``anthropic``, ``litellm``, ``openai_agents``, ``crewai``, ``mistralai``...);
each is offered as an instrument of that name: the member's own instrument when an
``Instruments`` member names it, else one made from the entry point (``init`` takes it by name).
Names a Composo integration provides (LangChain, LlamaIndex) are left to that integration, which
does more than switch the instrumentor on. Registered through the ``composo`` entry-point group
like any plugin; nothing is imported until an instrument is used.
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
