"""Hook specifications: every way to teach the SDK about a foreign object goes through these.

Converters are ``firstresult`` hooks: a plugin that does not recognise the object returns ``None``
and the next one is asked. Built-in adapters are registered ``trylast`` so plugins can override
them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    from composo._core.trace import MultiAgentTrace

hookspec = pluggy.HookspecMarker("composo")

Messages = list[dict[str, Any]]


@hookspec(firstresult=True)
def composo_convert_messages(obj: Any) -> Messages | None:
    """Turn ``obj`` (a value passed as ``messages=``) into OpenAI-style message dicts.

    Not asked for a list of plain chat dicts (``role`` system/user/assistant, a string
    ``content``, optionally ``name``): those are already in that shape and are sent as they are.
    """


@hookspec(firstresult=True)
def composo_convert_input(obj: Any) -> Messages | None:
    """Turn ``obj`` (a value passed as ``input=``, e.g. a Responses API input) into messages."""


@hookspec(firstresult=True)
def composo_convert_result(obj: Any) -> Messages | None:
    """Turn ``obj`` (a value passed as ``result=``) into messages appended to the conversation."""


@hookspec(firstresult=True)
def composo_convert_tools(obj: Any) -> Messages | None:
    """Turn ``obj`` (a value passed as ``tools=``) into OpenAI tool definitions."""


@hookspec(firstresult=True)
def composo_convert_trace(obj: Any) -> MultiAgentTrace | None:
    """Turn ``obj`` (a value passed as ``trace=``) into a ``MultiAgentTrace``."""


@hookspec(firstresult=True)
def composo_convert_item(obj: Any) -> Mapping[str, Any] | None:
    """Turn one dataset item into ``evaluate()`` keyword arguments (``messages``, ``result``...)."""


@hookspec
def composo_supported_types(kind: str) -> list[str] | None:
    """Describe, for error messages, what this plugin converts for ``kind``
    (``messages``, ``input``, ``result``, ``tools``, ``trace`` or ``item``)."""


@hookspec
def composo_instruments() -> list[Any] | None:
    """Tracing instruments this plugin adds: objects with ``name``, ``instrument(tracer_provider)``
    and ``uninstrument()`` (see ``composo.tracing._instruments``). ``ComposoTracer.init`` takes
    them as objects or by name, and an ``Instruments`` member of the same name resolves to them."""


@hookspec
def composo_judges() -> Mapping[str, Callable[..., Any]] | None:
    """Judges for the local server: name -> factory (see ``composo.server.judges``)."""
