"""OpenAI Responses API: ``input`` items, a ``Response`` and its ``tools`` as chat messages and tool
definitions in the wire's (Chat Completions) shape. ``openai`` objects are read through
``model_dump``, so this module never imports it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from composo._core.plugins import hookimpl
from composo.adapters.basic import is_list, is_openai_object, is_responses_message, with_sources

Json = Mapping[str, Any]
Message = dict[str, Any]

_ROLES = {"user": "user", "assistant": "assistant", "system": "system", "developer": "system"}
_TEXT_PARTS = {"input_text", "output_text", "text", "summary_text", "reasoning_text"}
_NOT_SHOWN = {"id", "type", "status", "call_id", "caller"}


def _plain(obj: Any) -> Any:
    """A JSON-ready value: ``openai`` objects are dumped, everything else passes through."""
    if is_openai_object(obj):
        return obj.model_dump(mode="json", exclude_none=True)
    return obj


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def _short_url(url: str) -> str:
    return "inline data" if url.startswith("data:") else url


def _part_text(part: Any) -> str:
    """One content part (text, refusal, image, file, audio) as text."""
    if isinstance(part, str):
        return part
    part = _plain(part)
    kind = part.get("type")
    if kind in _TEXT_PARTS:
        return with_sources(str(part.get("text") or ""), part.get("annotations"))
    if kind == "refusal":
        return f"[refusal] {part.get('refusal', '')}"
    if kind == "input_image":
        where = part.get("image_url") or part.get("file_id") or "inline data"
        return f"[image: {_short_url(str(where))}]"
    if kind == "input_file":
        name = part.get("filename") or part.get("file_id") or part.get("file_url") or "inline data"
        return f"[file: {_short_url(str(name))}]"
    if kind == "input_audio":
        return "[audio]"
    return _dumps(part)


def _content_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "\n".join(t for t in (_part_text(p) for p in content) if t)


def _call(call_id: str, name: str, arguments: Any) -> Message:
    """An assistant message holding one tool call; ``arguments`` is a JSON string or a value."""
    args = arguments if isinstance(arguments, str) else _dumps(arguments)
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}
        ],
    }


def _tool(call_id: str, content: str) -> Message:
    return {"role": "tool", "tool_call_id": call_id, "content": content or "(no output)"}


def _error_text(error: Any) -> str:
    if isinstance(error, Mapping):
        if error.get("message"):
            code = f" (code {error['code']})" if error.get("code") is not None else ""
            return f"{error['message']}{code}"
        if "content" in error:
            content = error["content"]
            return content if isinstance(content, str) else _dumps(content)
    return error if isinstance(error, str) else _dumps(error)


def _ident(item: Json) -> str:
    return str(item.get("call_id") or item.get("id") or item.get("type") or "call")


def _status(item: Json) -> str:
    return str(item.get("status") or "completed")


def _message(item: Json, where: str) -> list[Message]:
    role = item.get("role")
    if role not in _ROLES:
        raise ValueError(
            f"{where}.role is {role!r}; a Responses message has role user, assistant, system "
            "or developer"
        )
    text = _content_text(item.get("content"))
    if role == "assistant" and not text:
        text = "(empty message)"
    return [{"role": _ROLES[role], "content": text}]


def _function_call(item: Json, where: str) -> list[Message]:
    name = str(item.get("name") or "function")
    if item.get("namespace"):
        name = f"{item['namespace']}.{name}"
    return [_call(_ident(item), name, item.get("arguments") or "{}")]


def _custom_tool_call(item: Json, where: str) -> list[Message]:
    return [_call(_ident(item), str(item.get("name")), {"input": item.get("input", "")})]


def _tool_output(item: Json, where: str) -> list[Message]:
    """``*_call_output`` items: what a tool the application runs gave back."""
    output = item.get("output")
    if isinstance(output, Mapping) and output.get("type") == "computer_screenshot":
        where_ = output.get("image_url") or output.get("file_id") or "inline data"
        text = f"[screenshot: {_short_url(str(where_))}]"
    elif isinstance(output, list) and all(
        isinstance(p, Mapping) and p.get("type") in _TEXT_PARTS | {"input_image", "input_file"}
        for p in output
    ):
        text = _content_text(output)
    elif isinstance(output, str):
        text = output
    elif output is None:
        text = f"({item.get('type')} {_status(item)})"
    else:
        text = _dumps(output)
    return [_tool(_ident(item), text)]


def _web_search(item: Json, where: str) -> list[Message]:
    action = item.get("action") or {}
    kind = action.get("type", "search")
    if kind == "search":
        args: dict[str, Any] = {"query": action.get("query")}
        queries = action.get("queries") or []
        if queries and queries != [action.get("query")]:
            args["queries"] = queries
        sources = [s.get("url") or _dumps(s) for s in action.get("sources") or ()]
        if sources:
            found = "Sources:\n" + "\n".join(f"- {s}" for s in sources)
        else:
            found = f"Web search {_status(item)}; the response does not list its sources."
    elif kind == "open_page":
        args = {"action": "open_page", "url": action.get("url")}
        found = f"Opened {action.get('url')} ({_status(item)})."
    else:
        args = {"action": kind, **{k: v for k, v in action.items() if k != "type"}}
        found = f"{kind} {_status(item)}."
    if item.get("results"):
        found += "\n" + _dumps(item["results"])
    return [_call(_ident(item), "web_search", args), _tool(_ident(item), found)]


def _file_search(item: Json, where: str) -> list[Message]:
    results = item.get("results")
    if results:
        lines = []
        for n, r in enumerate(results, 1):
            name = r.get("filename") or r.get("file_id") or "file"
            score = r.get("score")
            scored = f" (score {score:.2f})" if isinstance(score, (int, float)) else ""
            lines.append(f"[{n}] {name}{scored}: {r.get('text') or ''}".rstrip())
        found = "\n".join(lines)
    elif results == []:
        found = "No results."
    else:
        found = f"File search {_status(item)}; the response does not include its results."
    args = {"queries": list(item.get("queries") or [])}
    return [_call(_ident(item), "file_search", args), _tool(_ident(item), found)]


def _code_interpreter(item: Json, where: str) -> list[Message]:
    shown = []
    for out in item.get("outputs") or ():
        if out.get("type") == "logs":
            shown.append(str(out.get("logs", "")))
        elif out.get("type") == "image":
            shown.append(f"[image: {_short_url(str(out.get('url', '')))}]")
        else:
            shown.append(_dumps(out))
    if not shown:
        shown.append(f"Code {_status(item)}; the response does not include its output.")
    args = {"code": item.get("code") or ""}
    return [_call(_ident(item), "code_interpreter", args), _tool(_ident(item), "\n".join(shown))]


def _mcp_list_tools(item: Json, where: str) -> list[Message]:
    label = item.get("server_label")
    if item.get("error"):
        listed = f"MCP server '{label}' could not list its tools: {_error_text(item['error'])}"
    else:
        names = [
            f"{t.get('name')}: {t['description']}" if t.get("description") else str(t.get("name"))
            for t in item.get("tools") or ()
        ]
        listed = f"MCP server '{label}' offers {len(names)} tool(s):\n" + "\n".join(
            f"- {n}" for n in names
        )
    args = {"server_label": label}
    return [_call(_ident(item), "mcp_list_tools", args), _tool(_ident(item), listed)]


def _mcp_call(item: Json, where: str) -> list[Message]:
    label = item.get("server_label")
    if item.get("error"):
        said = f"error: {_error_text(item['error'])}"
    elif item.get("output") is not None:
        said = str(item["output"])
    else:
        said = f"({_status(item)}, no output)"
    call = _call(_ident(item), str(item.get("name")), item.get("arguments") or "{}")
    return [call, _tool(_ident(item), f"[MCP server '{label}'] {said}")]


def _mcp_approval_request(item: Json, where: str) -> list[Message]:
    call = _call(_ident(item), str(item.get("name")), item.get("arguments") or "{}")
    note = (
        f"[MCP server '{item.get('server_label')}'] waiting for approval before running this "
        f"call (approval request {item.get('id')})"
    )
    return [call, _tool(_ident(item), note)]


def _mcp_approval_response(item: Json, where: str) -> list[Message]:
    verdict = "Approved" if item.get("approve") else "Denied"
    reason = f": {item['reason']}" if item.get("reason") else ""
    text = f"{verdict} MCP approval request {item.get('approval_request_id')}{reason}"
    return [{"role": "user", "content": text}]


def _computer_call(item: Json, where: str) -> list[Message]:
    args = item.get("action") or {"actions": item.get("actions") or []}
    return [_call(_ident(item), "computer", args)]


def _image_generation(item: Json, where: str) -> list[Message]:
    keys = ("revised_prompt", "action", "size", "quality", "background", "output_format")
    args = {("prompt" if k == "revised_prompt" else k): item[k] for k in keys if item.get(k)}
    if item.get("error"):
        made = f"Image generation failed: {_error_text(item['error'])}"
    elif item.get("result"):
        kind = item.get("output_format") or "image"
        made = f"Generated a {kind} image ({len(str(item['result']))} base64 characters)."
    else:
        made = f"Image generation {_status(item)}."
    return [_call(_ident(item), "image_generation", args), _tool(_ident(item), made)]


def _local_shell(item: Json, where: str) -> list[Message]:
    action = {k: v for k, v in (item.get("action") or {}).items() if k != "type" and v}
    return [_call(_ident(item), "local_shell", action)]


def _reasoning(item: Json, where: str) -> list[Message]:
    texts = [s.get("text", "") for s in item.get("summary") or ()]
    if not any(texts):
        texts = [c.get("text", "") for c in item.get("content") or ()]
    text = "\n".join(t for t in texts if t)
    # Encrypted-only reasoning has nothing a reader could evaluate.
    return [{"role": "assistant", "content": f"Reasoning summary: {text}"}] if text else []


def _item_reference(item: Json, where: str) -> list[Message]:
    raise ValueError(
        f"{where} is an item_reference ({item.get('id')!r}), which only the OpenAI API can "
        "resolve; pass the item itself (e.g. from response.output) instead"
    )


def _generic(item: Json, where: str) -> list[Message]:
    """Item types added to the API after this adapter: still shown, never dropped."""
    kind = str(item.get("type"))
    if kind.endswith("_output"):
        return _tool_output(item, where)
    rest = {k: v for k, v in item.items() if k not in _NOT_SHOWN and v is not None}
    if kind.endswith("_call"):
        return [_call(_ident(item), kind.removesuffix("_call"), rest)]
    return [{"role": "assistant", "content": f"[{kind}] {_dumps(rest)}"}]


_CONVERTERS: dict[str, Callable[[Json, str], list[Message]]] = {
    "message": _message,
    "function_call": _function_call,
    "function_call_output": _tool_output,
    "custom_tool_call": _custom_tool_call,
    "custom_tool_call_output": _tool_output,
    "computer_call": _computer_call,
    "computer_call_output": _tool_output,
    "local_shell_call": _local_shell,
    "local_shell_call_output": _tool_output,
    "web_search_call": _web_search,
    "file_search_call": _file_search,
    "code_interpreter_call": _code_interpreter,
    "image_generation_call": _image_generation,
    "mcp_list_tools": _mcp_list_tools,
    "mcp_call": _mcp_call,
    "mcp_approval_request": _mcp_approval_request,
    "mcp_approval_response": _mcp_approval_response,
    "reasoning": _reasoning,
    "item_reference": _item_reference,
    "compaction": lambda item, where: [],  # an opaque, encrypted summary of earlier turns
}


def _append(out: list[Message], new: list[Message]) -> None:
    """Add messages; a lone tool call joins the assistant message just before it, as the Chat
    Completions format writes parallel calls and "text, then call"."""
    for msg in new:
        prev = out[-1] if out else None
        if (
            prev is not None
            and prev["role"] == "assistant"
            and msg["role"] == "assistant"
            and msg.get("tool_calls")
            and msg.get("content") is None
        ):
            prev["tool_calls"] = [*prev.get("tool_calls", []), *msg["tool_calls"]]
        else:
            out.append(msg)


def items_to_messages(items: Sequence[Any], where: str) -> list[Message]:
    """Responses input or output items, in order, as chat messages."""
    out: list[Message] = []
    for i, raw in enumerate(items):
        item = _plain(raw)
        here = f"{where}[{i}]"
        if not isinstance(item, Mapping):
            raise ValueError(f"{here} is a {type(raw).__name__}; expected a Responses item dict")
        kind = item.get("type")
        if kind is None and "role" in item:
            kind = "message"
        convert = _CONVERTERS.get(str(kind), _generic)
        _append(out, convert(item, here))
    return out


# Built-in tools: the name their calls carry in the converted output, and what they do.
_BUILTIN_TOOLS: dict[str, tuple[str, str]] = {
    "web_search": ("web_search", "searches the web"),
    "web_search_2025_08_26": ("web_search", "searches the web"),
    "web_search_preview": ("web_search", "searches the web"),
    "web_search_preview_2025_03_11": ("web_search", "searches the web"),
    "file_search": ("file_search", "searches the uploaded files"),
    "code_interpreter": ("code_interpreter", "runs Python code in a sandbox"),
    "image_generation": ("image_generation", "generates or edits an image"),
    "computer_use_preview": ("computer", "operates a computer (screen, mouse, keyboard)"),
    "computer": ("computer", "operates a computer (screen, mouse, keyboard)"),
    "local_shell": ("local_shell", "runs shell commands on the local machine"),
    "shell": ("shell", "runs shell commands"),
    "apply_patch": ("apply_patch", "edits files by applying patches"),
    "tool_search": ("tool_search", "finds tools to load"),
}
_FREE_TEXT = {"type": "object", "properties": {"input": {"type": "string"}}, "required": ["input"]}
_DETAILS = ("vector_store_ids", "search_context_size", "container", "display_width", "model")


def _function(name: str, description: str | None, parameters: Any, strict: Any) -> Message:
    fn: dict[str, Any] = {"name": name}
    if description:
        fn["description"] = description
    fn["parameters"] = parameters if isinstance(parameters, Mapping) else {"type": "object"}
    if isinstance(strict, bool):
        fn["strict"] = strict
    return {"type": "function", "function": fn}


def _builtin(kind: str, tool: Json) -> Message:
    name, does = _BUILTIN_TOOLS.get(kind, (kind, "a tool the platform runs"))
    details = [f"{k}={_plain(tool[k])}" for k in _DETAILS if tool.get(k)]
    more = f" ({', '.join(details)})" if details else ""
    return _function(name, f"OpenAI built-in tool '{kind}': {does}{more}.", None, None)


def _mcp(tool: Json) -> list[Message]:
    label = str(tool.get("server_label") or "mcp")
    where = tool.get("server_url") or tool.get("connector_id") or ""
    about = f"Tool of the MCP server '{label}'" + (f" ({where})" if where else "")
    if tool.get("server_description"):
        about += f": {tool['server_description']}"
    allowed = tool.get("allowed_tools")
    names = allowed.get("tool_names") if isinstance(allowed, Mapping) else allowed
    if isinstance(names, list) and names:
        return [_function(str(n), about, None, None) for n in names]
    about += "; its calls are named after the server's tools"
    return [_function(f"mcp_{label}", about, None, None)]


def responses_tool(tool: Json, where: str) -> list[Message]:
    """One Responses tool definition (as a dict) in the wire's OpenAI tool shape."""
    kind = tool.get("type")
    if kind == "function":
        if "function" in tool:  # already in the Chat Completions shape
            return [dict(tool)]
        if not tool.get("name"):
            raise ValueError(f"{where}: a function tool needs a 'name'")
        about, parameters = tool.get("description"), tool.get("parameters")
        return [_function(str(tool["name"]), about, parameters, tool.get("strict"))]
    if kind == "custom" and "custom" not in tool:  # free-text input, sent as {"input": ...}
        fmt = tool.get("format")
        about = tool.get("description") or ""
        if isinstance(fmt, Mapping) and fmt.get("type") == "grammar":
            about = f"{about} (input follows a {fmt.get('syntax')} grammar)".strip()
        return [_function(str(tool.get("name")), about or None, _FREE_TEXT, None)]
    if kind == "mcp":
        return _mcp(tool)
    if kind == "namespace":  # a group of tools under one name
        out: list[Message] = []
        for i, inner in enumerate(tool.get("tools") or ()):
            out.extend(responses_tool(_plain(inner), f"{where}.tools[{i}]"))
        return out
    if isinstance(kind, str) and kind:
        return [_builtin(kind, tool)]
    raise ValueError(f"{where}: a Responses tool needs a 'type'")


def _is_responses_tool_dict(t: Json) -> bool:
    """A dumped Responses tool: a flat function, a flat custom tool or a built-in's config (a
    Chat Completions or Anthropic definition is none of these)."""
    kind = t.get("type")
    if kind == "function":
        return "function" not in t and "name" in t
    if kind == "custom":
        return "custom" not in t and "name" in t
    return kind in _BUILTIN_TOOLS or kind in ("mcp", "namespace")


def _is_tool_object(t: Any) -> bool:
    module = type(t).__module__
    if module.startswith("openai.types.responses"):
        # Tool classes (FunctionTool, WebSearchTool, Mcp...); a Response and its output items
        # (ResponseOutputMessage, ResponseFunctionWebSearch...) are not tools.
        return bool(getattr(t, "type", None)) and not type(t).__name__.startswith("Response")
    # Chat Completions tools (``ChatCompletionFunctionTool``, ``ChatCompletionCustomTool``).
    return module.startswith("openai.types.chat") and "Tool" in type(t).__name__


def _not_a_tool(t: Any, i: int) -> ValueError:
    kind = f"{type(t).__module__}.{type(t).__qualname__}"
    hint = (
        "pass response.tools (the tools the request offered), not the response"
        if getattr(t, "object", None) == "response"
        else "pass tool definitions: openai Responses or Chat Completions tools, or their dicts"
    )
    return ValueError(f"tools[{i}] is a {kind}, which is not a tool definition; {hint}")


def convert_tools(tools: Sequence[Any]) -> list[Message]:
    """Tool definitions (openai objects or dicts) in the wire's shape; Chat Completions and
    Anthropic dicts are kept as they are."""
    out: list[Message] = []
    for i, t in enumerate(tools):
        where = f"tools[{i}]"
        if isinstance(t, Mapping):
            out.extend(responses_tool(t, where) if _is_responses_tool_dict(t) else [dict(t)])
        elif is_openai_object(t):
            if not _is_tool_object(t):
                raise _not_a_tool(t, i)
            d = t.model_dump(mode="json", exclude_none=True, by_alias=True)
            out.extend(responses_tool(d, where) if _is_responses_tool_dict(d) else [d])
        else:
            raise ValueError(
                f"{where} is a {type(t).__module__}.{type(t).__qualname__}; pass tool definition "
                "dicts or openai tool objects"
            )
    return out


def _is_response(obj: Any) -> bool:
    """A ``Response``, as an object or its dict."""
    if isinstance(obj, Mapping):
        return obj.get("object") == "response"
    return is_openai_object(obj) and getattr(obj, "object", None) == "response"


@hookimpl(trylast=True)
def composo_result_tools(result: Any) -> Sequence[Any] | None:
    """The tools a ``Response`` (object or dict) was offered, or ``None``."""
    if not _is_response(result):
        return None
    tools = result.get("tools") if isinstance(result, Mapping) else getattr(result, "tools", None)
    return tools if isinstance(tools, Sequence) and tools else None


@hookimpl(trylast=True)
def composo_convert_input(obj: Any) -> list[Message] | None:
    if isinstance(obj, str):
        return [{"role": "user", "content": obj}]
    if is_list(obj):
        return items_to_messages(obj, "input")
    return None


def _is_output_item(item: Any) -> bool:
    if is_openai_object(item):
        return type(item).__module__.startswith("openai.types.responses")
    if not (isinstance(item, Mapping) and isinstance(item.get("type"), str)):
        return False
    # Chat-style {"type": "message", "content": "text"} dicts are left to the message adapter.
    return item["type"] != "message" or isinstance(item.get("content"), list)


def _is_output_list(obj: Any) -> bool:
    """``response.output`` itself: a non-empty list of Responses output items."""
    return is_list(obj) and bool(obj) and all(_is_output_item(i) for i in obj)


def _is_single_output_item(obj: Any) -> bool:
    """One item of ``response.output`` (e.g. ``response.output[0]``), as an object or its dict.
    A dict must be unmistakably a Responses item: chat and Anthropic messages stay with theirs."""
    if is_openai_object(obj):
        return _is_output_item(obj) and getattr(obj, "object", None) != "response"
    if not (isinstance(obj, Mapping) and isinstance(obj.get("type"), str)):
        return False
    return obj["type"] in _CONVERTERS if obj["type"] != "message" else is_responses_message(obj)


@hookimpl(trylast=True)
def composo_convert_result(obj: Any) -> list[Message] | None:
    if _is_output_list(obj):
        out = items_to_messages(obj, "result")
        return out or [{"role": "assistant", "content": "(no output items)"}]
    if _is_single_output_item(obj):
        return items_to_messages([obj], "result")
    if not _is_response(obj):
        return None
    resp = _plain(obj)
    messages = items_to_messages(resp.get("output") or [], "result.output")
    if not messages:
        # Say what happened rather than send an empty answer.
        note = f"(the response has no output; status {resp.get('status') or 'unknown'}"
        if resp.get("error"):
            note += f", error: {_error_text(resp['error'])}"
        if resp.get("incomplete_details"):
            note += f", incomplete: {resp['incomplete_details'].get('reason')}"
        messages = [{"role": "assistant", "content": note + ")"}]
    return messages


@hookimpl
def composo_convert_tools(obj: Any) -> list[Message] | None:
    if not is_list(obj) or not obj:
        return None
    if not all(isinstance(t, Mapping) or is_openai_object(t) for t in obj):
        return None
    if not any(is_openai_object(t) or _is_responses_tool_dict(t) for t in obj):
        return None  # plain Chat Completions / Anthropic dicts: the basic adapter keeps them
    return convert_tools(obj)


@hookimpl
def composo_supported_types(kind: str) -> list[str] | None:
    return {
        "tools": [
            "openai Responses tools (response.tools: FunctionTool, WebSearchTool, "
            "FileSearchTool, Mcp...) or Chat Completions tools, as objects or dicts"
        ],
        "input": [
            "a string (the user's request)",
            "a list of OpenAI Responses input items (role messages, function calls and their "
            "outputs, earlier output items), as dicts or openai objects",
        ],
        "result": [
            'an openai Responses Response (or its dict, with "object": "response")',
            "a Response's output list (response.output) or one of its items",
        ],
    }.get(kind)
