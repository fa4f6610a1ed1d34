"""The written rubric the LLM judge follows, and how a conversation is shown to it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from composo._core.wire import is_binary
from composo.server._cases import Case, content_text, tool_uses

__all__ = ["RUBRIC", "render_case", "verdict_instructions"]

RUBRIC = """You are an evaluation judge. You score one conversation (or one agent's part of an
agent run) against one criterion written in plain English, and you answer only with a JSON object.

How to read the criterion:
- "Reward ..." describes a quality to look for. Score from 0.0 to 1.0: 1.0 when the judged
  behaviour shows it fully, around 0.5 when partly, 0.0 when not at all.
- "Penalize ..." describes a fault. Score from 0.0 to 1.0: 1.0 when the judged behaviour is free
  of the fault, 0.0 when it shows the fault clearly and severely.
- "Passes if ..." is binary: score 1 when the condition holds, otherwise 0.
- "Fails if ..." is binary: score 0 when the condition holds, otherwise 1.
Higher is always better.

Not applicable: when the criterion is about something the conversation does not contain (for
example tool use when no tool was called, or use of sources when no source was provided), set
"applicable" to false and "score" to null. Do not use this to avoid a hard judgement.

Judge only what is marked as judged; earlier turns are context. Base the judgement on the
transcript, not on what the model might have meant. Keep the explanation to a few sentences that
name the evidence.

Answer with exactly this JSON object and nothing else:
{"applicable": true or false, "score": number or null, "explanation": "why"}"""


def verdict_instructions(case: Case) -> str:
    if is_binary(case.criterion):
        return "This criterion is binary: score must be exactly 0 or 1 (or null if not applicable)."
    return (
        "This criterion is graded: score is a number from 0.0 to 1.0 (or null if not applicable)."
    )


def _line(m: Mapping[str, Any]) -> str:
    role = str(m.get("role", "user"))
    text = content_text(m.get("content"))
    parts = [text] if text else []
    parts += [f"tool call {u.name}({u.arguments})" for u in tool_uses((m,))]
    if role == "tool":
        role = f"tool result{' ' + str(m['name']) if m.get('name') else ''}"
    return f"[{role}] " + ("\n".join(parts) if parts else "(empty)")


def render_case(case: Case) -> str:
    """The user prompt: criterion, tools, transcript with the judged part marked."""
    out = [f"Criterion: {case.criterion}", verdict_instructions(case), ""]
    if case.subject == "agent":
        out.append(
            f"What is judged: every turn of the agent {case.agent_name!r} below (its whole part "
            "of the run)."
        )
    elif case.evaluate_latest:
        out.append("What is judged: the last assistant turn; everything before it is context.")
    else:
        out.append("What is judged: every assistant turn of the conversation.")
    if case.system:
        out += ["", "System prompt:", case.system]
    if case.tools:
        out += ["", "Tools offered:"]
        for t in case.tools:
            fn = t.get("function", t)
            out.append(f"- {fn.get('name', '')}: {fn.get('description', '')}")
    out += ["", "Transcript:"]
    last_assistant = max(
        (i for i, m in enumerate(case.messages) if m.get("role") == "assistant"), default=-1
    )
    for i, m in enumerate(case.messages):
        marker = (
            ">>> JUDGED "
            if case.evaluate_latest and case.subject == "response" and i == last_assistant
            else ""
        )
        out.append(marker + _line(m))
    return "\n".join(out)
