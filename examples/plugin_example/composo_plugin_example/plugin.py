"""Hook implementations, found through the `composo` entry-point group once installed."""

from __future__ import annotations

from typing import Any

import composo
from composo_plugin_example import Transcript


@composo.hookimpl
def composo_convert_messages(obj: Any) -> list[dict[str, Any]] | None:
    if not isinstance(obj, Transcript):
        return None  # not ours: the next plugin is asked
    roles = ("user", "assistant")
    return [{"role": roles[i % 2], "content": text} for i, text in enumerate(obj.turns)]


@composo.hookimpl
def composo_supported_types(kind: str) -> list[str] | None:
    return ["composo_plugin_example.Transcript"] if kind == "messages" else None
