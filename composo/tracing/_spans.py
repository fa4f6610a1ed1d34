"""OpenInference model-call attributes (``llm.input_messages.*``, ``llm.output_messages.*``,
``llm.tools.*``) -> ``LLMInteraction``. For the OpenAI Responses API the instrumentor drops
built-in tool items (code interpreter, MCP calls, searches), so when the span carries the raw
request and response (``input.value`` / ``output.value``) the Responses adapter converts those.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

from composo._core import convert
from composo._core.trace import LLMInteraction, ToolSpec, chat_interaction, tool_spec
from composo.errors import ComposoValidationError

__all__ = [
    "EVENT_PREFIX",
    "indexed",
    "interaction",
    "openinference_interaction",
]

_log = logging.getLogger("composo.tracing")

SPAN_KIND = "openinference.span.kind"
_INPUTS = "llm.input_messages."
_OUTPUTS = "llm.output_messages."
_TOOLS = "llm.tools."
_JSON = "application/json"
EVENT_PREFIX = "gen_ai."
"""Only span events whose name starts with this are kept with a span (the GenAI messages)."""

Message = dict[str, Any]


def openinference_interaction(attributes: Mapping[str, Any]) -> LLMInteraction | None:
    """The call a span's OpenInference attributes describe; ``None`` when it has none of their
    messages."""
    inputs = [_flat_message(f) for f in indexed(attributes, _INPUTS)]
    outputs = [_flat_message(f) for f in indexed(attributes, _OUTPUTS)]
    raw = _responses_api(attributes)
    if raw is not None:
        raw_inputs, outputs = raw
        inputs = raw_inputs if raw_inputs is not None else inputs
    elif not inputs and not outputs:
        return None
    return interaction(attributes, inputs, outputs)


def interaction(
    attributes: Mapping[str, Any], inputs: list[Message], outputs: list[Message]
) -> LLMInteraction:
    """Chat messages as a call, with the tools the span's attributes say were offered."""
    specs = [_tool_spec(f) for f in indexed(attributes, _TOOLS)]
    return chat_interaction(inputs, outputs, [s for s in specs if s is not None] or None)


def indexed(attributes: Mapping[str, Any], prefix: str) -> list[dict[str, Any]]:
    """``{prefix}{i}.{rest}`` keys grouped by ``i``, in its order: ``[{rest: value}, ...]``."""
    out: dict[int, dict[str, Any]] = {}
    for key, value in attributes.items():
        if not key.startswith(prefix):
            continue
        index, _, rest = key.removeprefix(prefix).partition(".")
        if index.isdigit() and rest:
            out.setdefault(int(index), {})[rest] = value
    return [out[i] for i in sorted(out)]


def _flat_message(fields: Mapping[str, Any]) -> Message:
    """One ``message.*`` group as an OpenAI-style chat message dict."""
    role = str(fields.get("message.role") or "user")
    msg: Message = {"role": "assistant" if role == "model" else role}  # Gemini's "model"
    content = fields.get("message.content")
    if content is None:
        content = "".join(_part_text(p) for p in indexed(fields, "message.contents."))
    msg["content"] = str(content)
    calls = [
        _flat_call(c, "tool_call.id", "tool_call.function.name", "tool_call.function.arguments")
        for c in indexed(fields, "message.tool_calls.")
    ]
    if fields.get("message.function_call_name"):
        calls.append(
            _flat_call(
                fields, "", "message.function_call_name", "message.function_call_arguments_json"
            )
        )
    if calls:
        msg["tool_calls"] = calls
    if fields.get("message.tool_call_id") is not None:
        msg["tool_call_id"] = str(fields["message.tool_call_id"])
    if fields.get("message.name"):
        msg["name"] = str(fields["message.name"])
    return msg


def _flat_call(fields: Mapping[str, Any], call_id: str, name: str, arguments: str) -> Message:
    """A tool call read from the given keys, as an OpenAI-style dict."""
    return {
        "id": str(fields.get(call_id) or ""),
        "function": {
            "name": str(fields.get(name) or ""),
            "arguments": str(fields.get(arguments) or "{}"),
        },
    }


def _part_text(part: Mapping[str, Any]) -> str:
    kind = part.get("message_content.type")
    if kind in (None, "text"):
        return str(part.get("message_content.text") or "")
    if kind == "image":
        url = str(part.get("message_content.image.image.url") or "")
        return "[image]" if not url or url.startswith("data:") else f"[image: {url}]"
    # Reasoning and other non-text parts are the model's internals, not its messages.
    return ""


def _tool_spec(fields: Mapping[str, Any]) -> ToolSpec | None:
    tool = fields.get("tool.json_schema")
    if tool is None:
        if not fields.get("tool.name"):
            return None
        tool = {
            "name": fields["tool.name"],
            "description": fields.get("tool.description"),
            "parameters": fields.get("tool.parameters") or "{}",
        }
    tool = json.loads(tool) if isinstance(tool, str) else tool
    return tool_spec(tool) if isinstance(tool, Mapping) else None


def _json_value(attributes: Mapping[str, Any], key: str) -> Any:
    value = attributes.get(f"{key}.value")
    if attributes.get(f"{key}.mime_type") != _JSON or not isinstance(value, str):
        return None
    try:
        return json.loads(value)
    except ValueError:
        return None


def _responses_api(
    attributes: Mapping[str, Any],
) -> tuple[list[Message] | None, list[Message]] | None:
    response = _json_value(attributes, "output")
    if not isinstance(response, Mapping) or response.get("object") != "response":
        return None
    try:
        outputs = convert.to_result_messages(response)
    except ComposoValidationError as exc:
        _log.debug("reading the Responses output from span attributes instead: %s", exc)
        return None
    request = _json_value(attributes, "input")
    inputs: list[Message] | None = None
    if isinstance(request, Mapping) and request.get("input") is not None:
        try:
            inputs = convert.to_input_messages(request["input"])
        except ComposoValidationError as exc:
            _log.debug("reading the Responses input from span attributes instead: %s", exc)
        else:
            if request.get("instructions"):
                inputs.insert(0, {"role": "system", "content": str(request["instructions"])})
    return inputs, outputs
