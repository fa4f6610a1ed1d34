"""LLM-as-judge on any OpenAI-compatible Chat Completions endpoint (OpenAI, vLLM, Ollama...) over
plain httpx, with the rubric the model follows and how a conversation is shown to it."""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from typing import Any

import httpx
from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from composo._core import limits
from composo._core.retry import async_retrying, parse_retry_after
from composo._core.wire import is_binary
from composo.errors import APIConnectionError, APIStatusError, status_error
from composo.server._cases import Case, content_text, json_or_none, tool_uses
from composo.server._config import JudgeOptions
from composo.server.judges._verdict import JudgeError, Verdict

_log = logging.getLogger("composo.server")

DEFAULT_BASE_URL = "https://api.openai.com/v1"
DEFAULT_MODEL = "gpt-4o-mini"
MAX_RETRY_AFTER = limits.MAX_RETRY_AFTER  # a longer Retry-After is waited only this long
_RETRIES = 2  # after the first attempt; the policy (what to retry, backoff) is the client's
_AGAIN = (
    "That answer cannot be used: {}. Answer again with only the JSON object "
    '{{"applicable", "score", "explanation"}}.'
)
_FENCE = re.compile(r"^\s*```(?:json)?\s*|\s*```\s*$", re.IGNORECASE)


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

_BINARY = "This criterion is binary: score must be exactly 0 or 1 (or null if not applicable)."
_GRADED = "This criterion is graded: score is a number from 0.0 to 1.0 (or null if not applicable)."


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
    out = [f"Criterion: {case.criterion}", _BINARY if is_binary(case.criterion) else _GRADED, ""]
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
    assistant = [i for i, m in enumerate(case.messages) if m.get("role") == "assistant"]
    marked = assistant[-1:] if case.evaluate_latest and case.subject == "response" else []
    for i, m in enumerate(case.messages):
        out.append((">>> JUDGED " if i in marked else "") + _line(m))
    return "\n".join(out)


class _Answer(BaseModel):
    model_config = ConfigDict(extra="ignore")

    applicable: bool = True
    score: float | None = None  # a model saying "not applicable" often leaves the score out
    explanation: str

    @model_validator(mode="after")
    def _consistent(self) -> _Answer:
        if not self.applicable:
            self.score = None
        elif self.score is None:
            raise ValueError("score is null but applicable is true")
        elif not 0.0 <= self.score <= 1.0:
            raise ValueError(f"score {self.score} is outside 0..1")
        return self


def parse_answer(text: str, binary: bool) -> Verdict:
    """The model's JSON answer as a verdict; ``ValueError`` saying what is wrong otherwise."""
    data = json_or_none(_FENCE.sub("", text))
    if not isinstance(data, dict):
        raise ValueError("the answer is not a JSON object")
    try:
        answer = _Answer.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc'])) or 'answer'}: {e['msg'].removeprefix('Value error, ')}"
            for e in exc.errors(include_url=False)
        )
        raise ValueError(problems) from None
    if binary and answer.score not in (None, 0.0, 1.0):
        raise ValueError(f"score {answer.score} must be exactly 0 or 1 for a binary criterion")
    return Verdict(answer.score, answer.explanation.strip(), answer.explanation.strip())


class OpenAIJudge:
    """Judges with :data:`RUBRIC`; an unusable answer is sent back with what was wrong, up to
    ``max_attempts`` times."""

    name = "openai"

    def __init__(self, options: JudgeOptions) -> None:
        self.model = options.model or DEFAULT_MODEL
        base_url = (options.base_url or DEFAULT_BASE_URL).rstrip("/")
        if options.api_key is None and options.base_url is None:
            raise ValueError(
                "the openai judge needs an API key: set OPENAI_API_KEY or pass --judge-api-key "
                "(or point --judge-base-url / OPENAI_BASE_URL at a local OpenAI-compatible server)"
            )
        headers = {"Authorization": f"Bearer {options.api_key}"} if options.api_key else {}
        self.max_attempts = max(1, options.max_attempts)
        self._http = httpx.AsyncClient(base_url=base_url, headers=headers, timeout=options.timeout)

    def __repr__(self) -> str:
        return f"OpenAIJudge(model={self.model!r}, base_url={str(self._http.base_url)!r})"

    async def judge(self, case: Case) -> Verdict:
        binary = is_binary(case.criterion)
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": RUBRIC},
            {"role": "user", "content": render_case(case)},
        ]
        problem = ""
        for _ in range(self.max_attempts):
            text = await self._complete(messages)
            try:
                return parse_answer(text, binary)
            except ValueError as exc:
                problem = str(exc)
                _log.info("judge answer unusable (%s); asking again", problem)
                again = {"role": "user", "content": _AGAIN.format(problem)}
                messages = [*messages, {"role": "assistant", "content": text}, again]
        raise JudgeError(
            f"the judge model's answer could not be used after {self.max_attempts} attempts: "
            + problem
        )

    async def _complete(self, messages: list[dict[str, Any]]) -> str:
        body = {
            "model": self.model,
            "messages": messages,
            "temperature": 0,
            "response_format": {"type": "json_object"},
        }
        try:
            async for attempt in async_retrying(_RETRIES, max_retry_after=MAX_RETRY_AFTER):
                with attempt:
                    text = await self._post(body)
        except APIConnectionError as exc:
            raise JudgeError(str(exc)) from None
        except APIStatusError as exc:
            raise JudgeError(
                f"the judge endpoint answered {exc.status_code}: {exc.message}"
            ) from None
        return text

    async def _post(self, body: dict[str, Any]) -> str:
        """One attempt, failing as the client's errors so the client's retry policy applies."""
        try:
            r = await self._http.post("/chat/completions", json=body)
        except httpx.HTTPError as exc:
            raise APIConnectionError(
                f"could not reach the judge endpoint: {type(exc).__name__}"
            ) from None
        if r.status_code != 200:
            error = status_error(r.status_code, {"detail": _error_message(r)})
            error.retry_after = parse_retry_after(r.headers)
            raise error
        try:
            content = r.json()["choices"][0]["message"]["content"]
        except (ValueError, KeyError, IndexError, TypeError):
            raise JudgeError("the judge endpoint's answer is not a chat completion") from None
        return str(content or "")

    async def aclose(self) -> None:
        await self._http.aclose()


def _error_message(r: httpx.Response) -> str:
    body = json_or_none(r.content)
    err = body.get("error") if isinstance(body, dict) else None
    if isinstance(err, dict) and err.get("message"):
        return str(err["message"])[:300]
    return r.reason_phrase
