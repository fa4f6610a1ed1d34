"""OpenAI Chat Completions results: a ``ChatCompletion`` (object or dict) or one of its messages."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from composo._core.plugins import hookimpl
from composo.adapters.basic import clean_chat_message, is_openai_object


def _as_dict(obj: Any) -> Mapping[str, Any] | None:
    if isinstance(obj, Mapping):
        return obj
    # Look before dumping: other openai objects (a Responses ``Response``) are not ours.
    if (
        is_openai_object(obj)
        and not type(obj).__module__.startswith("openai.types.responses")
        and (hasattr(obj, "choices") or getattr(obj, "role", None) or hasattr(obj, "finish_reason"))
    ):
        dumped: dict[str, Any] = obj.model_dump(mode="json", exclude_none=True)
        return dumped
    return None


@hookimpl(trylast=True)
def composo_convert_result(obj: Any) -> list[dict[str, Any]] | None:
    d = _as_dict(obj)
    if d is None:
        return None
    if d.get("object") == "chat.completion" or ("choices" in d and "output" not in d):
        choices = d.get("choices") or []
        if not choices:
            raise ValueError("the chat completion has no choices to evaluate")
        # The first choice is the answer the application used.
        return [clean_chat_message(choices[0]["message"])]
    if is_openai_object(obj) and d.get("role") == "assistant":
        return [clean_chat_message(d)]
    if "finish_reason" in d and isinstance(d.get("message"), Mapping):
        # One choice, e.g. ``completion.choices[0]``.
        return [clean_chat_message(d["message"])]
    return None


@hookimpl
def composo_supported_types(kind: str) -> list[str] | None:
    if kind == "result":
        return ["an openai ChatCompletion, one of its choices, or its message (or their dicts)"]
    if kind == "messages":
        return ["openai ChatCompletionMessage objects inside the list"]
    return None
