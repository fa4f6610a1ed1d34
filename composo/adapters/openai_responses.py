"""OpenAI Responses API: ``input`` values and ``Response`` results (placeholder, being written)."""

from __future__ import annotations

from typing import Any

from composo.plugins import hookimpl


@hookimpl(trylast=True)
def composo_convert_input(obj: Any) -> list[dict[str, Any]] | None:
    if isinstance(obj, str):
        return [{"role": "user", "content": obj}]
    return None
