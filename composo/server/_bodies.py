"""Small helpers shared by the gate and the routes: JSON bodies and error answers."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

__all__ = ["dumps", "validation_detail"]

try:
    import orjson

    def dumps(obj: Any) -> bytes:
        return orjson.dumps(obj)

except ImportError:  # pragma: no cover - orjson is optional
    import json

    def dumps(obj: Any) -> bytes:
        return json.dumps(obj, separators=(",", ":")).encode()


_MAX_ERRORS = 5


def validation_detail(exc: ValidationError) -> str:
    """One readable line naming each offending field, as the platform's 422 does."""
    parts: list[str] = []
    errors = exc.errors(include_url=False, include_input=False)
    for err in errors[:_MAX_ERRORS]:
        loc = ".".join(str(x) for x in err["loc"])
        if err["type"] == "extra_forbidden":
            msg = "unknown field: the API does not accept it; remove it"
        else:
            msg = str(err["msg"]).removeprefix("Value error, ")
        parts.append(f"{loc}: {msg}" if loc else msg)
    if len(errors) > _MAX_ERRORS:
        parts.append(f"and {len(errors) - _MAX_ERRORS} more")
    return "; ".join(parts)
