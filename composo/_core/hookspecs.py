"""Hook specifications: every way to teach the SDK about a foreign object goes through these.

Converters are ``firstresult`` hooks: a plugin that does not recognise the object returns ``None``
and the next one is asked. Built-in adapters are ``trylast`` so plugins can override them.
Packages above the core declare their own hooks with :func:`composo._core.plugins.add_hookspecs`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
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
    ``content``, optionally ``name``): those are sent as they are.
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
def composo_result_tools(result: Any) -> Sequence[Any] | None:
    """The tools ``result`` was offered (a Responses ``Response`` carries them), used as
    ``tools=`` when that is not given; ``None`` if it carries none."""


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


@hookspec(firstresult=True)
def composo_repr_html(obj: Any) -> str | None:
    """A notebook's view of a result (``obj`` is an evaluation response, a ``BatchResult`` or
    ``BatchResults``); the core itself renders nothing."""


@hookspec(firstresult=True)
def composo_progress_bar(total: int | None) -> Any:
    """A progress display for ``progress=True``: an object with ``start()``,
    ``update(done, note)`` and ``close()``. Raise if it cannot be shown: it is asked for before
    any request is made."""
