"""A transparent, deterministic development stand-in for the platform's judge. It is NOT a
quality judge: it combines a few surface signals and names each one in the explanation, so a
developer can see why a score came out as it did and wire up pipelines offline."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterable, Mapping, Set
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from composo._core.wire import is_binary
from composo.server._cases import Case, ToolUse, content_text, tool_uses
from composo.server.judges import Verdict

__all__ = ["HeuristicJudge", "score_case"]

_WORD = re.compile(r"[a-z0-9]+")
_REFUSAL = re.compile(
    r"\b(?:i\s+(?:can\s*not|can't|cannot|won't|will\s+not|am\s+(?:unable|not\s+able))"
    r"|i'm\s+(?:unable|not\s+able|sorry)|sorry,?\s+(?:but\s+)?i|as\s+an\s+ai)\b",
    re.IGNORECASE,
)
_STOP = frozenset(
    [
        "a",
        "an",
        "the",
        "and",
        "or",
        "but",
        "if",
        "then",
        "than",
        "that",
        "this",
        "these",
        "those",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "being",
        "to",
        "of",
        "in",
        "on",
        "at",
        "by",
        "for",
        "with",
        "from",
        "as",
        "into",
        "about",
        "over",
        "under",
        "it",
        "its",
        "it's",
        "their",
        "there",
        "they",
        "them",
        "he",
        "she",
        "his",
        "her",
        "you",
        "your",
        "we",
        "our",
        "i",
        "me",
        "my",
        "do",
        "does",
        "did",
        "done",
        "not",
        "no",
        "so",
        "such",
        "very",
        "more",
        "most",
        "less",
        "least",
        "any",
        "all",
        "each",
        "every",
        "some",
        "can",
        "could",
        "should",
        "would",
        "will",
        "may",
        "might",
        "must",
        "has",
        "have",
        "had",
        "which",
        "who",
        "whom",
        "whose",
        "what",
        "when",
        "where",
        "why",
        "how",
        "also",
        "only",
        "just",
        "both",
        "either",
        "neither",
        "other",
        "others",
        "own",
        "same",
        "too",
        "up",
        "down",
        "out",
        "off",
        "again",
        "further",
        "once",
        "here",
        "s",
        "t",
        "don't",
        "doesn't",
    ]
)
# Words of the criterion that describe the verdict, not what to look for.
_CRITERION_NOISE = frozenset(
    [
        "reward",
        "rewards",
        "penalize",
        "penalizes",
        "penalise",
        "passes",
        "pass",
        "fails",
        "fail",
        "response",
        "responses",
        "answer",
        "answers",
        "reply",
        "replies",
        "assistant",
        "assistants",
        "agent",
        "agents",
        "model",
        "output",
        "outputs",
        "message",
        "messages",
        "good",
        "well",
        "better",
        "best",
        "clearly",
        "clear",
        "appropriate",
        "appropriately",
        "directly",
        "user",
        "users",
    ]
)
# Dismissive or rude phrasing, and hedging that leaves the user without an answer.
_RUDE = re.compile(
    r"\b(?:calm\s+down|read\s+the\s+(?:terms|manual|docs|faq)|next\s+time|obviously|"
    r"figure\s+it\s+out|not\s+my\s+problem|stupid|whatever)\b",
    re.IGNORECASE,
)
_HEDGE = re.compile(
    r"\b(?:maybe|probably|possibly|not\s+sure|i\s+think|i\s+guess|or\s+something|perhaps)\b",
    re.IGNORECASE,
)
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
_TOOL_TERMS = frozenset({"tool", "tools", "function", "functions"})
_REFUSE_TERMS = frozenset({"refuse", "refuses", "refusal", "refusals", "decline", "declines"})
_NEGATIVE_PREFIXES = ("penalize", "penalise", "fails if")


def _strip(word: str) -> str:
    """The word without a plural or tense ending."""
    for suffix in ("ing", "ed", "es", "s"):
        if len(word) > len(suffix) + 3 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def _term(word: str) -> str:
    """A word's term: its stem, or ``""`` for a stop word or a single letter."""
    return "" if word in _STOP or len(word) < 2 else _strip(word)


# Words and texts up to these sizes keep what was worked out of them (a conversation repeats
# its words, one request asks for the same answer's terms several times, a run repeats its
# question and system prompt); longer ones, rare and a way to fill memory, are worked out again.
_CACHED_WORD = 32
_CACHED_TEXT = 4096
_term_cached = lru_cache(maxsize=1 << 16)(_term)


def _stem(word: str) -> str:
    return _term_cached(word) if len(word) <= _CACHED_WORD else _term(word)


def _terms_of(text: str) -> frozenset[str]:
    stems = frozenset(map(_stem, _WORD.findall(text.lower())))
    return stems - {""} if "" in stems else stems


_terms_cached = lru_cache(maxsize=1024)(_terms_of)


def _terms(text: str) -> frozenset[str]:
    return _terms_cached(text) if len(text) <= _CACHED_TEXT else _terms_of(text)


@dataclass(frozen=True)
class _Criterion:
    """What scoring needs of a criterion, worked out once per distinct criterion."""

    binary: bool
    negative: bool
    key_terms: frozenset[str]
    about_tools: bool
    about_refusal: bool


_NOISE_STEMS = frozenset(map(_strip, _CRITERION_NOISE))


def _criterion(criterion: str) -> _Criterion:
    return _criterion_cached(criterion) if len(criterion) <= _CACHED_TEXT else _read(criterion)


def _read(criterion: str) -> _Criterion:
    lowered = criterion.lower()
    words = set(_WORD.findall(lowered))
    return _Criterion(
        binary=is_binary(criterion),
        negative=lowered.startswith(_NEGATIVE_PREFIXES),
        key_terms=_terms_of(criterion) - _NOISE_STEMS,
        about_tools=bool(words & _TOOL_TERMS) or "function call" in lowered,
        about_refusal=bool(words & _REFUSE_TERMS),
    )


_criterion_cached = lru_cache(maxsize=512)(_read)


@dataclass(frozen=True)
class _Parts:
    question: str
    answer: str
    calls: list[ToolUse]
    all_calls: list[ToolUse]
    # What the answer could draw on besides the question: system prompt, tool results.
    material: str = ""
    tool_results: str = ""


def _split(case: Case) -> _Parts:
    """The question, the judged answer and the judged tool calls."""
    messages = case.messages
    assistant_idx = [i for i, m in enumerate(messages) if m.get("role") == "assistant"]
    all_calls = tool_uses(messages)
    if not assistant_idx:
        judged: Iterable[int] = ()
        first = len(messages)
    elif case.evaluate_latest:
        judged = assistant_idx[-1:]
        first = assistant_idx[-1]
    else:
        judged = assistant_idx
        first = assistant_idx[0]
    judged = set(judged)
    answer = " ".join(content_text(messages[i].get("content")) for i in sorted(judged)).strip()
    users = [content_text(m.get("content")) for m in messages[:first] if m.get("role") == "user"]
    if not users:
        users = [content_text(m.get("content")) for m in messages if m.get("role") == "user"]
    question = users[-1] if users else ""
    calls = [c for c in all_calls if c.message_index in judged]
    last = max(judged) if judged else len(messages)
    before = messages[:last]
    tool_results = " ".join(
        content_text(m.get("content")) for m in before if m.get("role") in ("tool", "function")
    )
    systems = [case.system or ""]
    systems += [content_text(m.get("content")) for m in before if m.get("role") == "system"]
    # Anthropic-style tool results arrive inside user turns; all user turns are material too.
    users_text = " ".join(content_text(m.get("content")) for m in before if m.get("role") == "user")
    material = " ".join([*systems, tool_results, users_text]).strip()
    return _Parts(question, answer, calls, all_calls, material, tool_results)


def _tool_names(tools: Iterable[Mapping[str, Any]]) -> set[str]:
    names: set[str] = set()
    for t in tools:
        fn = t.get("function", t)
        if isinstance(fn, Mapping) and fn.get("name"):
            names.add(str(fn["name"]))
    return names


def _numbers(text: str) -> set[str]:
    """Figures in ``text``, normalised (``1,500`` and ``1500`` are the same figure)."""
    return {n.replace(",", "") for n in _NUMBER.findall(text)}


def _ratio(found: int, total: int) -> float:
    return found / total if total else 0.0


def score_case(case: Case) -> Verdict:
    """Score ``case`` from surface signals; the same input always gives the same verdict."""
    crit = _criterion(case.criterion.strip())
    binary, negative, key_terms = crit.binary, crit.negative, crit.key_terms
    about_tools, about_refusal = crit.about_tools, crit.about_refusal
    parts = _split(case)
    who = f"agent {case.agent_name!r}" if case.agent_name else "the response"
    tail = " (Heuristic signals, not a quality judgement.)"

    if about_tools and not parts.all_calls:
        reason = f"Not applicable: the criterion is about tool use and {who} made no tool call."
        return Verdict(None, reason + tail, reason)

    signals: list[str] = []
    answer_terms = _terms(parts.answer)
    for call in parts.calls:
        answer_terms |= _terms(call.name.replace("_", " ") + " " + call.arguments)
    words = len(_WORD.findall(parts.answer))
    empty = words == 0 and not parts.calls
    refused = _REFUSAL.search(parts.answer) is not None

    if empty:
        signals.append("the judged answer is empty")
        quality = 0.0
    else:
        signals.append(
            f"answer of {words} word(s)"
            + (f" and {len(parts.calls)} tool call(s)" if parts.calls else "")
        )
        q_terms = _terms(parts.question)
        q_overlap = _ratio(len(answer_terms & q_terms), len(q_terms))
        if q_terms:
            signals.append(f"overlap with the question {q_overlap:.2f}")
        else:
            q_overlap = 0.5
            signals.append("no user question to compare with")
        found = sorted(answer_terms & key_terms)
        coverage = _ratio(len(found), len(key_terms))
        if key_terms:
            shown = ", ".join(found[:6]) if found else "none"
            signals.append(f"criterion key terms present {len(found)}/{len(key_terms)} ({shown})")
        length_ok = 1.0 if words >= 5 or parts.calls else 0.4
        if length_ok < 1:
            signals.append("very short answer")
        penalty, grounded = _grounding(parts, answer_terms, signals)
        if negative:
            # The criterion names what is bad: the more of it the answer shows, the lower the score.
            quality = 0.85 - 0.55 * coverage + 0.15 * q_overlap
        elif grounded is None:
            quality = 0.2 + 0.4 * q_overlap + 0.3 * coverage + 0.1 * length_ok - penalty
        else:
            # Context to draw on: how much of the answer it supports weighs most, then how much
            # the answer says (a few words rarely resolve anything).
            substance = min(1.0, words / 25)
            quality = (
                0.15
                + 0.2 * q_overlap
                + 0.15 * coverage
                + 0.15 * substance
                + 0.35 * grounded
                - penalty
            )
        if refused:
            signals.append("the answer refuses")
            if about_refusal:
                quality = 0.1 if negative else 0.95
            else:
                quality *= 0.25 if grounded is None else 0.6
        elif about_refusal and not negative:
            signals.append("no refusal found")
            quality = min(quality, 0.3)
        if about_tools:
            quality = _tool_adjust(case, parts, q_terms, negative, quality, signals)

    quality = min(1.0, max(0.0, quality))
    if binary:
        score = 1.0 if quality >= 0.5 else 0.0
        verdict = "passes" if score else "fails"
        summary = f"{who.capitalize()} {verdict} (signal strength {quality:.2f})"
    else:
        score = round(quality, 3)
        summary = f"Score {score:.3f} for {who}"
    # The verdict first, then the signals behind it; the caveat last and short.
    body = summary + ": " + "; ".join(signals) + "."
    return Verdict(score, body + tail, body)


def _grounding(
    parts: _Parts, answer_terms: Set[str], signals: list[str]
) -> tuple[float, float | None]:
    """Signals of an answer that is unfounded or unhelpful: figures and words not found in what
    it could draw on (system prompt, user turns, tool results), tool results it ignores, rude or
    hedging phrasing. Returns the penalty and the grounded share (``None`` when the question is
    all there is to draw on)."""
    penalty = 0.0
    grounded: float | None = None
    material_terms = _terms(parts.material)
    if parts.material and material_terms - _terms(parts.question):
        grounded = _ratio(len(answer_terms & material_terms), len(answer_terms))
        signals.append(f"words found in the context {grounded:.2f}")
        # Figures of two digits or more: single digits are too often counts and steps.
        figures = {n for n in _numbers(parts.answer) if len(n.replace(".", "")) > 1}
        unfounded = sorted(figures - _numbers(parts.material))
        if unfounded:
            signals.append(f"figure(s) not in the context: {', '.join(unfounded[:4])}")
            penalty += min(0.2, 0.1 * len(unfounded))
    if parts.tool_results and parts.answer:
        used = _ratio(
            len(_terms(parts.answer) & _terms(parts.tool_results)), len(_terms(parts.answer))
        )
        if used < 0.2:
            signals.append(f"little of the tool results used ({used:.2f})")
            penalty += 0.15
    if _RUDE.search(parts.answer):
        signals.append("dismissive or rude phrasing")
        penalty += 0.3
    hedges = len(_HEDGE.findall(parts.answer))
    if hedges >= 2:
        signals.append(f"hedging ({hedges} hedges)")
        penalty += 0.2
    return penalty, grounded


def _tool_adjust(
    case: Case,
    parts: _Parts,
    q_terms: Set[str],
    negative: bool,
    quality: float,
    signals: list[str],
) -> float:
    """Tool criteria look at the calls: offered tools, arguments that parse, grounded arguments."""
    calls = parts.calls or parts.all_calls
    offered = _tool_names(case.tools)
    unknown = sorted({c.name for c in calls if offered and c.name not in offered})
    bad_args = 0
    for c in calls:
        try:
            json.loads(c.arguments or "{}")
        except ValueError:
            bad_args += 1
    arg_terms: Set[str] = frozenset()
    for c in calls:
        arg_terms |= _terms(c.arguments)
    grounded = _ratio(len(arg_terms & q_terms), len(arg_terms)) if arg_terms else 1.0
    names = ", ".join(sorted({c.name for c in calls}))
    signals.append(f"tool calls: {names}")
    if unknown:
        signals.append(f"called tool(s) not offered: {', '.join(unknown)}")
    if bad_args:
        signals.append(f"{bad_args} call(s) with arguments that are not JSON")
    signals.append(f"arguments grounded in the question {grounded:.2f}")
    repeated = len(calls) - len({(c.name, c.arguments) for c in calls})
    if repeated:
        signals.append(f"{repeated} repeated call(s)")
    good = 0.4 + 0.3 * grounded + (0.0 if unknown else 0.2) + (0.0 if bad_args else 0.1)
    good -= 0.15 * repeated
    if negative:
        # Negative tool criteria name a fault; any fault found decides the verdict.
        return min(quality, 0.2) if (unknown or bad_args or repeated) else max(quality, good)
    return 0.5 * quality + 0.5 * good


# Above this many characters of conversation, scoring takes long enough (about 0.2 s a MiB) to
# stall every other request on the event loop, so it runs in a worker thread instead.
_INLINE_CHARS = 64 * 1024


def _size(case: Case) -> int:
    size = len(case.system or "")
    for m in case.messages:
        content = m.get("content")
        if isinstance(content, str) and not m.get("tool_calls"):
            size += len(content)
        else:
            size += len(str(m))
    return size


class HeuristicJudge:
    """The default judge: offline, instant and deterministic."""

    name = "heuristic"

    def judge_sync(self, case: Case) -> Verdict:
        """The same verdict without awaiting: the server calls this from a worker thread to
        judge a large trace's agents in one go."""
        return score_case(case)

    async def judge(self, case: Case) -> Verdict:
        if _size(case) > _INLINE_CHARS:
            return await asyncio.to_thread(score_case, case)
        return score_case(case)

    async def aclose(self) -> None:
        return None
