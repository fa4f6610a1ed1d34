"""Ask the plugins to turn what the user passed into wire-ready values, or say what is supported.

:mod:`composo.ext` lists and publishes its public names (all but ``result_tools``, which only
the core's request building uses)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from composo._core.plugins import get_plugin_manager
from composo._core.trace import MultiAgentTrace
from composo.errors import ComposoValidationError, validation_error

_PLUGIN_HINT = (
    "To support another type, write a plugin: implement the matching `composo_convert_*` hook "
    "with `@composo.hookimpl` under the `composo` entry-point group (docs/integrations/"
    "writing.md, 'Writing an adapter plugin')."
)


def _a(kind: type) -> str:
    """``a tuple``, ``an int``, ``a mypackage.Transcript``."""
    name = kind.__qualname__
    if kind.__module__ != "builtins":
        name = f"{kind.__module__}.{name}"
    return f"{'an' if name[0].lower() in 'aeiou' else 'a'} {name}"


def unsupported(kind: str, obj: Any) -> ComposoValidationError:
    """An error naming the field (a list's first item that is no message dict, by its index),
    the type received, what is supported and how to add support."""
    described: list[str] = []
    for answer in get_plugin_manager().hook.composo_supported_types(kind=kind):
        described.extend(answer or ())
    supported = "; ".join(dict.fromkeys(described)) or "nothing registered"
    what = f"{kind}: cannot use {_a(type(obj))}"
    if isinstance(obj, (list, tuple)):
        odd = next(((i, x) for i, x in enumerate(obj) if not isinstance(x, Mapping)), None)
        if odd is not None:
            what = f"{kind}[{odd[0]}]: cannot use {_a(type(odd[1]))}"
            if kind in ("messages", "input", "result"):
                what += " as a message; a message is a dict: {'role': 'user', 'content': '...'}"
    return ComposoValidationError(f"{what}. Supported: {supported}. {_PLUGIN_HINT}")


def _convert(kind: str, hook_name: str, obj: Any) -> Any:
    hook = getattr(get_plugin_manager().hook, hook_name)
    try:
        out = hook(obj=obj)
    except ComposoValidationError:
        raise
    except ValidationError as exc:
        raise validation_error(exc, field=kind) from None
    except (TypeError, ValueError, KeyError, AttributeError) as exc:
        raise ComposoValidationError(f"{kind}: could not be converted: {exc}") from exc
    if out is None:
        raise unsupported(kind, obj)
    return out


# Plain chat dicts of these keys and roles are copied as they are, not offered to every plugin
# in turn (that was a good part of the client's own work per request).
_PLAIN_KEYS = frozenset({"role", "content", "name"})
_PLAIN_ROLES = frozenset({"system", "user", "assistant"})


def _plain_messages(obj: Any) -> list[dict[str, Any]] | None:
    if type(obj) is not list:
        return None
    out = []
    for m in obj:
        if (
            type(m) is not dict
            or type(m.get("content")) is not str
            or m.get("role") not in _PLAIN_ROLES
            or not _PLAIN_KEYS.issuperset(m)
        ):
            return None
        out.append(dict(m))  # a copy: the caller's dicts are never changed
    return out


def to_messages(obj: Any) -> list[dict[str, Any]]:
    plain = _plain_messages(obj)
    if plain is not None:
        return plain
    return list(_convert("messages", "composo_convert_messages", obj))


def to_input_messages(obj: Any) -> list[dict[str, Any]]:
    return list(_convert("input", "composo_convert_input", obj))


def to_result_messages(obj: Any) -> list[dict[str, Any]]:
    return list(_convert("result", "composo_convert_result", obj))


def to_tools(obj: Any) -> list[dict[str, Any]]:
    return list(_convert("tools", "composo_convert_tools", obj))


def result_tools(result: Any) -> Any:
    """The tools ``result`` was offered (a Responses ``Response`` carries them), or ``None``."""
    return get_plugin_manager().hook.composo_result_tools(result=result)


def to_trace(obj: Any) -> MultiAgentTrace:
    if isinstance(obj, MultiAgentTrace):
        return obj
    out = _convert("trace", "composo_convert_trace", obj)
    if not isinstance(out, MultiAgentTrace):
        raise ComposoValidationError(
            f"trace: a plugin returned {type(out).__name__}, expected MultiAgentTrace"
        )
    return out


def to_item(obj: Any) -> Mapping[str, Any]:
    out: Mapping[str, Any] = _convert("item", "composo_convert_item", obj)
    return out
