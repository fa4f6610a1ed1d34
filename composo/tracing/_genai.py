"""Model calls and tool runs recorded by the OpenTelemetry GenAI conventions -> trace parts.

Messages are read from whichever form a span carries, newest first: ``gen_ai.input.messages`` /
``gen_ai.output.messages`` / ``gen_ai.system_instructions`` (attributes, or a
``gen_ai.client.inference.operation.details`` event: Strands), OpenLLMetry's indexed
``gen_ai.prompt.N.*`` / ``gen_ai.completion.N.*``, the older per-message ``gen_ai.*.message`` and
``gen_ai.choice`` events (or PydanticAI's JSON ``events`` attribute), then Semantic Kernel's plain
prompt and completion. Content blocks of OpenAI, Anthropic, Gemini and Bedrock become OpenAI-style
chat messages, converted by the core as OpenInference's are. Nothing here imports OpenTelemetry.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from composo._core.trace import LLMInteraction, ToolSpec, chat_interaction, tool_spec
from composo.tracing._spans import EVENT_PREFIX, indexed, interaction, openinference_interaction

__all__ = [
    "Events",
    "genai_interaction",
    "interaction_from_attributes",
    "interaction_from_span",
    "tool_arguments",
    "tool_call_id",
    "tool_result",
]

Events = Sequence[tuple[str, Mapping[str, Any]]]
"""A span's events as ``(name, attributes)`` pairs, in the order they were added."""

Message = dict[str, Any]
Part = dict[str, Any]

# each side of a call (output?): its messages attribute, OpenLLMetry's indexed prefix, the plain
# attribute and event (Semantic Kernel), the default role
_SIDES = {
    False: ("gen_ai.input.messages", "gen_ai.prompt", "gen_ai.content.prompt", "user"),
    True: ("gen_ai.output.messages", "gen_ai.completion", "gen_ai.content.completion", "assistant"),
}
_SYSTEM = "gen_ai.system_instructions"
_DETAILS = "gen_ai.client.inference.operation.details"
_ROLE_EVENTS = {
    "gen_ai.system.message": "system",
    "gen_ai.user.message": "user",
    "gen_ai.assistant.message": "assistant",
    "gen_ai.tool.message": "tool",
}
_CHOICE = "gen_ai.choice"

_log = logging.getLogger("composo.tracing")


def interaction_from_span(span: Any) -> LLMInteraction | None:
    """The call a finished span describes; ``None`` (logged) when the call failed or the span
    cannot be read."""
    status = getattr(getattr(span, "status", None), "status_code", None)
    name = getattr(span, "name", "LLM span")
    if getattr(status, "name", None) == "ERROR":
        _log.debug("skipping failed model call %s: %s", name, span.status.description)
        return None
    dropped = getattr(span, "dropped_attributes", 0)
    if dropped:
        _log.warning(
            "model call %s lost %d span attribute(s) to the OpenTelemetry attribute limit, so its "
            "earliest messages may be missing from the trace; raise the limit with "
            "OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT or TracerProvider(span_limits=SpanLimits(...))",
            name,
            dropped,
        )
    events = getattr(span, "events", None) or ()
    try:
        return interaction_from_attributes(
            span.attributes or {},
            [(e.name, e.attributes or {}) for e in events if e.name.startswith(EVENT_PREFIX)],
        )
    except (ValueError, TypeError, KeyError) as exc:
        _log.warning("could not read model call %s into the trace: %s", name, exc)
        return None


def interaction_from_attributes(
    attributes: Mapping[str, Any], events: Events = ()
) -> LLMInteraction:
    """Convert a model call span's attributes (and its ``gen_ai.*`` events)."""
    found = openinference_interaction(attributes)
    if found is None:
        found = genai_interaction(attributes, events)
    return found if found is not None else interaction(attributes, [], [])


def genai_interaction(attributes: Mapping[str, Any], events: Events = ()) -> LLMInteraction | None:
    """The model call a span records by the GenAI conventions (any form above); ``None`` when
    it carries no GenAI messages."""
    details = [attrs for name, attrs in events if name == _DETAILS]
    current = [attributes, *details]
    chat = _side(attributes, events, current, output=False)
    outputs = _side(attributes, events, current, output=True)
    system = _system(current)
    if not chat and not outputs:
        return None
    if system is not None and not (chat and chat[0] == system):
        chat.insert(0, system)
    return chat_interaction(chat, outputs, _tools(attributes) or None)


def _side(
    attributes: Mapping[str, Any], events: Events, current: list[Mapping[str, Any]], *, output: bool
) -> list[Message]:
    """One side of the call (input or output messages) from the first form that carries it."""
    key, prefix, event, role = _SIDES[output]
    return (
        _messages_in(current, key)
        or _indexed_messages(attributes, f"{prefix}.", role)
        or _event_messages(events, output=output)
        or _event_messages(_events_attribute(attributes), output=output)
        or _plain(attributes, events, prefix, event, role)
    )


def tool_call_id(attributes: Mapping[str, Any]) -> str | None:
    """The id of the tool call a tool span answers (OpenInference or GenAI)."""
    value = attributes.get("gen_ai.tool.call.id") or attributes.get("tool_call.id")
    return str(value) if value else None


def tool_arguments(attributes: Mapping[str, Any]) -> str | None:
    """What a GenAI tool span was called with, as JSON text (``None``: not recorded)."""
    for key in ("gen_ai.tool.call.arguments", "tool_arguments", "traceloop.entity.input"):
        value = attributes.get(key)
        if value is not None:
            return _arguments(value)
    return None


def tool_result(attributes: Mapping[str, Any], events: Events = ()) -> Any:
    """What a tool span returned: OpenInference's ``output.value``, GenAI's
    ``gen_ai.tool.call.result`` (PydanticAI's ``tool_response`` before it), OpenLLMetry's entity
    output, or a ``gen_ai.choice`` event's message (Strands); ``None`` when not recorded."""
    for key in ("output.value", "gen_ai.tool.call.result", "tool_response"):
        if key in attributes:
            return attributes[key]
    if attributes.get("traceloop.entity.output") is not None:
        return attributes["traceloop.entity.output"]
    for name, attrs in events:
        if name == _CHOICE and attrs.get("message") is not None:
            return _text_of(_parts_of(attrs["message"]))
    return None


def _loads(value: Any) -> Any:
    """JSON text as its value; anything else (already structured, or not JSON) as it is."""
    if isinstance(value, str):
        text = value.strip()
        if text[:1] in ("[", "{"):
            try:
                return json.loads(text)
            except ValueError:
                return value
    return value


def _objects(value: Any) -> list[Mapping[str, Any]]:
    """The objects of a list (or of its JSON text), each given as is or as JSON text."""
    value = _loads(value)
    items = (_loads(item) for item in value) if isinstance(value, list) else ()
    return [item for item in items if isinstance(item, Mapping)]


def _messages_in(sources: Iterable[Mapping[str, Any]], key: str) -> list[Message]:
    for attrs in sources:
        value = _loads(attrs.get(key))
        if isinstance(value, list) and value:
            return [m for item in _objects(value) for m in _message(item)]
    return []


def _system(sources: Iterable[Mapping[str, Any]]) -> Message | None:
    for attrs in sources:
        value = _loads(attrs.get(_SYSTEM))
        if value in (None, "", []):
            continue
        parts = _parts_of(value if isinstance(value, (list, str)) else [value])
        text = _text_of(parts)
        if text:
            return {"role": "system", "content": text}
    return None


def _indexed_messages(attributes: Mapping[str, Any], prefix: str, role: str) -> list[Message]:
    out: list[Message] = []
    for fields in indexed(attributes, prefix):
        said = str(fields.get("role") or role)
        parts = _parts_of(fields.get("content"))
        for call in indexed(fields, "tool_calls."):
            parts.append(_call(call.get("id"), call.get("name"), call.get("arguments")))
        if fields.get("function_call.name"):
            parts.append(
                _call(None, fields["function_call.name"], fields.get("function_call.arguments"))
            )
        if said == "tool" or fields.get("tool_call_id"):
            parts = [_response(fields.get("tool_call_id"), fields.get("name"), parts)]
        out.extend(_chat(said, parts))
    return out


def _events_attribute(attributes: Mapping[str, Any]) -> Events:
    """PydanticAI's version 1 form: the events as a JSON list in the span attribute ``events``."""
    items = _objects(attributes.get("events"))
    return [(item["event.name"], item) for item in items if isinstance(item.get("event.name"), str)]


def _event_messages(events: Events, *, output: bool) -> list[Message]:
    out: list[Message] = []
    for name, attrs in events:
        body = _body(attrs)
        if name == _CHOICE and output:
            out.extend(_choice(body))
        elif name in _ROLE_EVENTS and not output:
            call_id = body.get("id") or body.get("tool_call_id")  # the event's own id first
            out.extend(_message({**body, "role": _ROLE_EVENTS[name], "tool_call_id": call_id}))
    return out


def _body(attrs: Mapping[str, Any]) -> Mapping[str, Any]:
    """An event's body: its attributes, with ``gen_ai.event.content`` (Azure's SDKs) merged."""
    extra = _loads(attrs.get("gen_ai.event.content"))
    return {**attrs, **extra} if isinstance(extra, Mapping) else attrs


def _choice(body: Mapping[str, Any]) -> list[Message]:
    message = _loads(body.get("message"))
    if isinstance(message, Mapping) and ({"role", "content", "tool_calls", "parts"} & set(message)):
        found: Mapping[str, Any] = message
    elif message is not None:
        found = {"content": message}  # Strands: the answer's content blocks
    else:
        found = {"content": body.get("content"), "tool_calls": body.get("tool_calls")}
    return _message({**found, "role": "assistant"})


def _plain(
    attributes: Mapping[str, Any], events: Events, key: str, event: str, role: str
) -> list[Message]:
    """A whole prompt or completion in one value: a JSON list of messages or a string."""
    values = [attributes.get(key), *(a.get(key) for n, a in events if n == event)]
    out: list[Message] = []
    for raw in values:
        value = _loads(raw)
        if isinstance(value, list) and all(isinstance(m, Mapping) for m in value):
            for m in value:
                out.extend(_message({"role": role, **m}))
        elif isinstance(value, str) and value:
            out.append({"role": role, "content": value})
    return out


def _message(msg: Mapping[str, Any]) -> list[Message]:
    """One GenAI message (``role`` and ``parts``, or ``content`` and ``tool_calls``) as chat
    messages: tool responses become ``tool`` messages of their own."""
    role = str(msg.get("role") or "user")
    raw = _loads(msg.get("parts"))
    if isinstance(raw, list):
        parts = [p for p in (_block(_loads(b)) for b in raw if b is not None) if p is not None]
    else:
        parts = _parts_of(msg.get("content"))
        parts.extend(_openai_calls(msg.get("tool_calls")))
        if role == "tool" and not any(p["type"] == "tool_call_response" for p in parts):
            parts = [_response(msg.get("tool_call_id") or msg.get("id"), msg.get("name"), parts)]
    return _chat(role, parts)


def _chat(role: str, parts: list[Part]) -> list[Message]:
    """Parts in order as chat messages: text and tool calls of one turn share a message, each
    tool response is one. Reasoning is the model's internals and is left out."""
    role = "assistant" if role == "model" else role  # Gemini's name for the assistant
    out: list[Message] = []
    texts: list[str] = []
    calls: list[dict[str, Any]] = []

    def flush() -> None:
        if texts or calls:
            msg: Message = {"role": role, "content": "\n".join(texts)}
            if calls:
                msg["tool_calls"] = list(calls)
            out.append(msg)
            texts.clear()
            calls.clear()

    for part in parts:
        kind = part["type"]
        if kind == "text":
            texts.append(part["content"])
        elif kind == "tool_call":
            calls.append(
                {"id": part["id"], "function": {"name": part["name"], "arguments": part["args"]}}
            )
        elif kind == "tool_call_response":
            flush()
            msg = {"role": "tool", "tool_call_id": part["id"], "content": part["response"]}
            if part.get("name"):
                msg["name"] = part["name"]
            out.append(msg)
    flush()
    return out


def _parts_of(content: Any) -> list[Part]:
    """Message content in any of the forms frameworks write it, as parts."""
    value = _loads(content)
    if isinstance(content, str) and not (
        isinstance(value, list) and value and all(_block(b) is not None for b in value)
    ):
        return [_text(content)] if content else []  # text, even when it looks like JSON
    if value is None or value == "":
        return []
    if isinstance(value, Mapping):
        found = _block(value)
        if found is not None:
            return [found]
        if set(value) == {"content"}:  # Vertex AI's tool message body
            return _parts_of(value["content"])
        return [_text(_dump(value))]
    if isinstance(value, list):
        return [_block(item) or _text(_result(item)) for item in value if item is not None]
    return [_text(str(value))]


def _block(block: Any) -> Part | None:
    """One content block (GenAI part, OpenAI, Anthropic, Gemini or Bedrock), or ``None``."""
    if not isinstance(block, Mapping):
        return None
    kind = block.get("type")
    if kind in ("text", "input_text", "output_text"):
        text = block.get("content", block.get("text"))
        return _text(text if isinstance(text, str) else _dump(text))
    if kind in ("tool_call", "tool_use", "function_call"):
        args = block.get("arguments", block.get("input"))
        return _call(block.get("id") or block.get("call_id"), block.get("name"), args)
    if kind in ("tool_call_response", "tool_result", "function_call_output"):
        result = block.get("response", block.get("result", block.get("content")))
        call_id = block.get("id") or block.get("tool_use_id") or block.get("call_id")
        return _response(call_id, block.get("name"), result)
    if kind in ("reasoning", "thinking", "redacted_thinking"):
        return {"type": "reasoning"}
    if kind is not None:
        return _text(_media(kind, block))
    if isinstance(block.get("text"), str):  # Gemini and Bedrock
        return _text(block["text"])
    call = block.get("toolUse") or block.get("function_call") or block.get("functionCall")
    if isinstance(call, Mapping):
        args = call.get("input", call.get("args"))
        return _call(call.get("toolUseId") or call.get("id"), call.get("name"), args)
    answer = block.get("toolResult")
    if isinstance(answer, Mapping):
        return _response(answer.get("toolUseId"), None, answer.get("content"))
    answer = block.get("function_response") or block.get("functionResponse")
    if isinstance(answer, Mapping):
        return _response(answer.get("id"), answer.get("name"), answer.get("response"))
    if isinstance(block.get("json"), (Mapping, list)):  # Bedrock's JSON tool result block
        return _text(_dump(block["json"]))
    return None


def _media(kind: str, block: Mapping[str, Any]) -> str:
    """A placeholder naming a non-text part (an image, a file) without its bytes."""
    where = block.get("uri") or block.get("url") or block.get("file_id")
    if isinstance(block.get("image_url"), Mapping):
        where = block["image_url"].get("url")
    label = str(block.get("modality") or kind)
    if isinstance(where, str) and where and not where.startswith("data:"):
        return f"[{label}: {where}]"
    return f"[{label}]"


def _text(content: Any) -> Part:
    return {"type": "text", "content": "" if content is None else str(content)}


def _call(call_id: Any, name: Any, arguments: Any) -> Part:
    return {
        "type": "tool_call",
        "id": str(call_id or ""),
        "name": str(name or ""),
        "args": _arguments(arguments),
    }


def _response(call_id: Any, name: Any, result: Any) -> Part:
    blocks = isinstance(result, list) and result and all(_block(p) is not None for p in result)
    text = _text_of(result) if blocks else _result(result)
    part: Part = {"type": "tool_call_response", "id": str(call_id or ""), "response": text}
    if name:
        part["name"] = str(name)
    return part


def _text_of(parts: list[Any]) -> str:
    """The text of parts (or of content blocks)."""
    blocks = (_block(p) for p in parts)
    return "\n".join(str(b["content"]) for b in blocks if b is not None and b["type"] == "text")


def _openai_calls(value: Any) -> list[Part]:
    out = []
    for call in _objects(value):
        inner = call.get("function")
        fn: Mapping[str, Any] = inner if isinstance(inner, Mapping) else call
        out.append(_call(call.get("id"), fn.get("name"), fn.get("arguments", fn.get("args"))))
    return out


def _arguments(value: Any) -> str:
    """Tool-call arguments as JSON text, written one way whatever form they were recorded in
    (an object, or JSON text with any spacing), so the same call reads the same."""
    if value is None or value == "":
        return "{}"
    parsed = _loads(value)
    return parsed if isinstance(parsed, str) else _dump(parsed)


def _result(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else _dump(value)


def _dump(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def _tools(attributes: Mapping[str, Any]) -> list[ToolSpec]:
    out = [tool_spec(item) for item in _objects(attributes.get("gen_ai.tool.definitions"))]
    for fields in indexed(attributes, "llm.request.functions."):
        if fields.get("name"):
            params = _loads(fields.get("parameters"))
            out.append(tool_spec({**fields, "parameters": params if params is not None else {}}))
    return out
