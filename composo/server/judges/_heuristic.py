"""A transparent, deterministic development stand-in for the platform's judge, NOT a quality
judge: it reads the criterion for words it has a rule for (``_RULES``; their words are in
``_words.TRAITS``) or a "Passes if the answer names X" check, reads the answer for the matching
surface signals and says what it looked for and found. Where it cannot judge (no source material,
no tool call) it answers ``None``, as the platform does for "not applicable"."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from functools import cached_property, lru_cache, partial
from typing import Any, NamedTuple

import composo.server.judges._words as w
from composo._core.wire import is_binary
from composo.server._cases import Case, content_text, json_or_none, tool_results, tool_uses
from composo.server.judges._verdict import Verdict

TAIL = " (Heuristic stand-in: surface signals, not a quality judgement.)"


def _original(terms: Iterable[str], text: str) -> list[str]:
    """The words of ``text`` behind ``terms``, as written rather than stemmed."""
    wanted = set(terms)
    if not wanted:
        return []
    return list(dict.fromkeys(x for x in w.WORD.findall(text.lower()) if w.term_of(x) in wanted))


def _quote(found: Iterable[str], limit: int = 4) -> str:
    shown = list(dict.fromkeys(" ".join(f.split()) for f in found))
    return ", ".join(f"'{f}'" for f in shown[:limit]) or "none"


class _Reading(NamedTuple):
    """How strongly the answer shows a trait (0 to 1), and what was looked for and found."""

    value: float
    found: str


# -- the conversation as the readings see it ----------------------------------------------------


def _text(message: Mapping[str, Any]) -> str:
    return content_text(message.get("content"))


def _holds_facts(text: str) -> bool:
    """A system prompt with facts to check against ("You are a helpful assistant" has none)."""
    if w.NUMBER.search(text) or w.DOCUMENT.search(text) or len(text.split()) >= 25:
        return True
    return bool(text.strip()) and not w.ROLE_ONLY.match(text)


class _View:
    """The parts of a case the readings look at, the costlier ones worked out when asked for."""

    def __init__(self, case: Case) -> None:
        messages = case.messages
        assistant = [i for i, m in enumerate(messages) if m.get("role") == "assistant"]
        judged = assistant[-1:] if case.evaluate_latest else assistant
        self.last = judged[-1] if judged else len(messages)
        self.case = case
        self.answer = " ".join(_text(messages[i]) for i in judged).strip()
        users = [
            _text(m) for m in messages[: judged[0] if judged else None] if m.get("role") == "user"
        ]
        asked = users[-1] if users else ""
        docs = w.DOCUMENT.search(asked)  # a question with documents after it is the text before
        self.question = asked[: docs.start()] if docs and docs.start() else asked
        self.all_calls = tool_uses(messages)
        self.judged_calls = [c for c in self.all_calls if c.message_index in judged]
        self.calls = self.judged_calls or self.all_calls
        self.tool_results = " ".join(t for i, t in tool_results(messages) if i < self.last)

    @cached_property
    def context(self) -> str:
        """A system prompt with facts, tool results, documents pasted into a user turn."""
        before = self.case.messages[: self.last]
        systems = [self.case.system or ""] + [_text(m) for m in before if m.get("role") == "system"]
        users = [_text(m) for m in before if m.get("role") == "user"]
        docs = [u for u in users if w.DOCUMENT.search(u) or len(u.split()) >= 80]
        return " ".join([*filter(_holds_facts, systems), self.tool_results, *docs]).strip()

    @cached_property
    def words(self) -> int:
        return len(w.WORD.findall(self.answer.lower()))

    @cached_property
    def answer_terms(self) -> frozenset[str]:
        return w.terms(self.answer + " " + " ".join(c.name.replace("_", " ") for c in self.calls))

    def before(self, index: int) -> str:
        """Everything but the assistant's turns before message ``index``."""
        shown = [_text(m) for m in self.case.messages[:index] if m.get("role") != "assistant"]
        return " ".join([self.case.system or "", *shown])


# -- readings: one per trait the stand-in can notice --------------------------------------------


def _found(pattern: re.Pattern[str], text: str) -> list[str]:
    return [m.group() for m in pattern.finditer(text)]


def _politeness(v: _View) -> _Reading:
    rude, kind = _found(w.RUDE, v.answer), _found(w.COURTESY, v.answer)
    value = max(0.0, 0.3 - 0.1 * len(rude)) if rude else 0.7 + 0.1 * min(2, len(kind))
    courtesy = f" (courtesy: {_quote(kind)})"
    return _Reading(
        value, f"looked for rude or dismissive phrasing, found {_quote(rude)}{courtesy}"
    )


def _shows(what: str, find: Callable[[str], list[str]], v: _View) -> _Reading:
    found = find(v.answer)
    return _Reading(0.9 if found else 0.1, f"looked for {what}, found {_quote(found)}")


def _presence(pattern: re.Pattern[str], what: str) -> Callable[[_View], _Reading]:
    return partial(_shows, what, partial(_found, pattern))


def _clarifying(v: _View) -> _Reading:
    asked = [q.strip() for q in w.SENTENCE_END.split(v.answer) if q.strip().endswith("?")]
    value = 0.9 if any(map(w.CLARIFYING.search, asked)) else 0.4 if asked else 0.1
    return _Reading(value, f"looked for a question back to the user, found {_quote(asked, 2)}")


def _brevity(v: _View) -> _Reading:
    value = 0.1 + 0.8 * min(1.0, max(0.0, (160 - v.words) / 120))
    return _Reading(value, f"counted {v.words} word(s) (short up to 40, long from 160)")


def _confidence(v: _View) -> _Reading:
    hedges = _found(w.HEDGE, v.answer)
    return _Reading(
        max(0.1, 0.9 - 0.25 * len(hedges)), f"looked for hedging, found {_quote(hedges)}"
    )


def _support(v: _View, material: str, what: str) -> _Reading:
    """How much of the answer ``material`` (and the question) supports: its words, its figures of
    two digits or more, and no simple contradiction ("hasn't shipped" against "shipped")."""
    support = w.terms(material) | w.terms(v.question)
    share = len(v.answer_terms & support) / len(v.answer_terms) if v.answer_terms else 0.0
    figures = {n for n in w.numbers(v.answer) if len(n.replace(".", "")) > 1}
    unfounded = sorted(figures - w.numbers(material + " " + v.question))
    denied = {w.term(x.lower()) for x in w.DENIED.findall(v.answer) if len(x) > 4}
    denied -= {w.term(x.lower()) for x in w.DENIED.findall(material)}
    contradicted = _original(denied & w.terms(material), v.answer)
    value = 0.15 + 0.75 * share - 0.15 * min(2, len(unfounded)) - 0.2 * bool(contradicted)
    found = f"{share:.0%} of the answer's words are in {what}"
    found += f", figure(s) not there: {', '.join(unfounded[:4])}" if unfounded else ""
    found += (
        f", it denies what {what} states ({', '.join(contradicted[:3])})" if contradicted else ""
    )
    return _Reading(min(1.0, max(0.0, value)), found)


def _grounding(v: _View) -> _Reading:
    return _support(v, v.context, "the context")


def _tool_result_use(v: _View) -> _Reading:
    reading = _support(v, v.tool_results, "the tool results")
    if v.answer and not v.answer_terms & w.terms(v.tool_results):
        return _Reading(min(reading.value, 0.2), reading.found + ", so the results are ignored")
    return reading


def _relevance(v: _View) -> _Reading:
    """General answer quality: the question's words answered, substance, no refusal, rudeness
    or hedging, and support by the context where there is one."""
    asked = w.terms(v.question)
    shared = v.answer_terms & asked
    value = 0.3 + 0.45 * (len(shared) / len(asked) if asked else 0.5) + 0.25 * min(1, v.words / 25)
    shown = _quote(_original(shared or asked, v.question), 3)
    count = f"{len(shared)} of the question's {len(asked)}" if shared else "none of the question's"
    found = [f"it takes up {count} key words ({shown})" if asked else "no question to answer"]
    found.append(f"{v.words} word(s)")
    for seen, cut, label in _FAULTS:
        if seen(v.answer):
            value, found = cut(value), [*found, label]
    if v.context:
        support = _grounding(v)
        value, found = 0.5 * value + 0.5 * support.value, [*found, support.found]
    return _Reading(min(1.0, max(0.0, value)), ", ".join(found))


# What lowers the general reading: (seen in the answer, how it lowers it, what it is called).
_FAULTS: tuple[tuple[Callable[[str], object], Callable[[float], float], str], ...] = (
    (w.REFUSAL.search, lambda x: x * 0.5, "it refuses"),
    (w.RUDE.search, lambda x: x - 0.3, "rude phrasing"),
    (lambda a: len(w.HEDGE.findall(a)) >= 2, lambda x: x - 0.2, "hedging"),
)


def _accuracy(v: _View) -> _Reading:
    if v.context:
        return _grounding(v)
    general = _relevance(v)
    return _Reading(general.value, "nothing to check facts against, so " + general.found)


def _tool_defs(tools: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """Each offered tool's name and the words that describe it."""
    fns = [t.get("function", t) for t in tools]
    return {
        str(f["name"]): f"{f['name']} {f.get('description') or ''}".replace("_", " ")
        for f in fns
        if isinstance(f, Mapping) and f.get("name")
    }


def _values(value: Any) -> str:
    """The values inside a call's parsed arguments, as text (keys say nothing of grounding)."""
    if isinstance(value, Mapping):
        value = list(value.values())
    if isinstance(value, list):
        return " ".join(map(_values, value))
    if value is None:
        return ""
    return format(value, "g") if isinstance(value, float) else str(value)


def _tool_faults(v: _View, offered: dict[str, str]) -> list[str]:
    """Tools not offered, arguments not JSON, repeats, a tool the criterion names left uncalled."""
    calls, criterion = v.calls, v.case.criterion
    faults = [f"{c.name} was not offered" for c in calls if offered and c.name not in offered]
    faults += [
        f"{c.name}'s arguments are not JSON"
        for c in calls
        if json_or_none(c.arguments or "{}") is None
    ]
    repeated = len(calls) - len({(c.name, c.arguments) for c in calls})
    faults += [f"{repeated} repeated call(s)"] if repeated else []
    named = {n for n in offered if re.search(rf"\b{re.escape(n)}\b", criterion)}
    return faults + [
        f"{n} (named by the criterion) was not called"
        for n in sorted(named - {c.name for c in calls})
    ]


def _better_tool(v: _View, offered: dict[str, str]) -> list[str]:
    """An offered tool that shares words with the question when no called tool does."""
    asked = w.terms(v.question)
    fit = {name: len(asked & w.terms(words)) for name, words in offered.items()}
    best = max(sorted(fit), key=fit.__getitem__, default="")
    if not best or not fit[best] or any(fit.get(c.name) for c in v.calls):
        return []
    return [f"{best} fits the question better"]


def _tool_use(v: _View) -> _Reading:
    """Offered tools called with JSON arguments found earlier in the conversation, no repeats."""
    offered = _tool_defs(v.case.tools)
    faults, worse = _tool_faults(v, offered), _better_tool(v, offered)
    values = [
        (w.terms(_values(json_or_none(c.arguments or "{}"))), c.message_index) for c in v.calls
    ]
    grounded = [len(t & w.terms(v.before(i))) / len(t) for t, i in values if t]
    share = sum(grounded) / len(grounded) if grounded else 1.0
    value = 0.1 + 0.2 * share if faults else 0.4 + 0.5 * share - 0.3 * bool(worse)
    names = ", ".join(dict.fromkeys(c.name for c in v.calls))
    found = f"calls {names}; {share:.0%} of argument values found earlier in the conversation"
    return _Reading(value, found + "".join(f"; {f}" for f in faults + worse))


# -- "Passes if the answer names X" -------------------------------------------------------------


def _content_kind(what: str, verb: str) -> tuple[str, Callable[[str], list[str]]] | None:
    """What to look for in the answer when the criterion asks for ``what``: quoted phrases, a
    kind of thing (``_words.KINDS``), a proper name ("names a city"), else X's own words."""
    quoted = w.QUOTED.findall(what)
    if quoted:
        return " and ".join(f"'{q}'" for q in quoted), partial(_phrases, quoted)
    for words, label, pattern in w.KINDS:
        if words.search(what):
            return label, partial(_found, pattern)
    if verb.startswith("name") and re.match(r"(?:an?|the|some)\s", what, re.I):
        return "a proper name", partial(_found, w.PROPER_NAME)
    terms = w.terms(what) - w.NOISE_TERMS
    strict = verb.startswith(w.STRICT_VERBS)
    label = f"the words {', '.join(_original(terms, what))}"
    return (label, partial(_words_in, terms, strict)) if terms else None


def _phrases(quoted: list[str], answer: str) -> list[str]:
    found = [q for q in quoted if q.lower() in answer.lower()]
    return found if len(found) == len(quoted) else []


def _words_in(terms: frozenset[str], strict: bool, answer: str) -> list[str]:
    found = terms & w.terms(answer)
    enough = len(found) == len(terms) if strict else len(found) * 2 >= len(terms)
    return _original(found, answer) if enough and found else []


# -- the criterion ------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Rule:
    """A trait a criterion may name (its words: ``_words.TRAITS[label]``), how the answer is read
    for it, what the conversation must hold for it to apply, whether it is the only reading, and
    ``polarity`` -1 once a criterion names the opposite of what ``read`` measures."""

    label: str
    read: Callable[[_View], _Reading]
    needs: str = ""
    alone: bool = False
    polarity: int = 1

    @cached_property
    def words(self) -> tuple[re.Pattern[str], re.Pattern[str] | None]:
        good, bad = w.TRAITS[self.label]
        return w.phrases(good), w.phrases(bad) if bad else None


# In order: the first ``alone`` rule a criterion names is its only reading; the others combine.
_RULES = (
    _Rule("use of tool results", _tool_result_use, "tool", alone=True),
    _Rule(
        "citations", _presence(w.CITATION, "citations ([1], 'according to', a link)"), alone=True
    ),
    _Rule("support by the context", _grounding, "context", alone=True),
    _Rule("tool use", _tool_use, "tool", alone=True),
    _Rule("politeness", _politeness),
    _Rule("apology", _presence(w.APOLOGY, "an apology")),
    _Rule("a clarifying question", _clarifying),
    _Rule("refusal", _presence(w.REFUSAL, "a refusal")),
    _Rule("brevity", _brevity),
    _Rule("confidence", _confidence),
    _Rule("accuracy", _accuracy),
    _Rule("answering the question", _relevance),
)


class _Plan(NamedTuple):
    binary: bool
    sign: int  # -1 for Penalize and Fails if
    checks: tuple[_Rule, ...]


def _polarity(rule: _Rule, text: str) -> int | None:
    """+1 if ``text`` names the rule's trait, -1 its opposite (a negation turns either round)."""
    good, bad = rule.words
    for pattern, sign in ((bad, -1), (good, 1)):
        m = pattern.search(text) if pattern else None
        if m:
            return -sign if w.NEGATION.search(text[: m.start()]) else sign
    return None


def _content_check(criterion: str) -> _Rule | None:
    """A check for "Passes if the answer names X"; graded criteria only for a kind of thing."""
    m = w.CONTENT.match(criterion)
    what = m["what"].rstrip(" .") if m else ""
    kind = _content_kind(what, m["verb"].lower()) if m and what else None
    if m is None or kind is None or (kind[0].startswith("the words") and not is_binary(criterion)):
        return None
    read = partial(_shows, kind[0] + " in the answer", kind[1])
    return _Rule(f"{m['verb']} {what}", read, polarity=-1 if m["neg"] else 1)


def _rule_checks(body: str) -> list[_Rule]:
    """A check for each rule the criterion's words name; an ``alone`` rule is the only one."""
    checks: list[_Rule] = []
    for rule in _RULES:
        polarity = _polarity(rule, body)
        if polarity is not None:
            checks.append(replace(rule, polarity=polarity))
            if rule.alone:
                return checks[-1:]
    return checks


@lru_cache(maxsize=512)
def _plan(criterion: str) -> _Plan:
    """A content check, the rules the criterion's words name, or its own words as a topic."""
    text = criterion.strip()
    sign = -1 if text.lower().startswith(("penalize", "penalise", "fails if")) else 1
    content = _content_check(text)
    checks = [content] if content else _rule_checks(w.SUBJECT.sub("", text, count=1))
    if not checks:
        checks.append(_Rule("the criterion's own words", partial(_topic, text, sign)))
    return _Plan(is_binary(text), sign, tuple(checks))


def _topic(criterion: str, sign: int, v: _View) -> _Reading:
    """No rule reads the criterion: its own words as a topic when the answer has some of them;
    when it has none, general answer quality (for Penalize too: nothing it names was seen)."""
    terms = w.terms(criterion) - w.NOISE_TERMS
    found = terms & v.answer_terms
    if not found:
        general = _relevance(v)
        value = general.value if sign > 0 else 1 - general.value
        return _Reading(value, "no rule for its words, read as general quality: " + general.found)
    shown = _quote(_original(found, v.answer))
    return _Reading(
        0.3 + 0.6 * len(found) / len(terms), f"found {shown} of its words in the answer"
    )


# -- the verdict --------------------------------------------------------------------------------

_MISSING = {
    "tool": "it is about tool use and {who} made no tool call",
    "context": "it is about source material and the conversation holds none to check against "
    "(no system prompt with facts, tool result or document in a user turn)",
}


def _not_applicable(plan: _Plan, v: _View, who: str) -> str | None:
    held = {"tool": bool(v.all_calls), "context": bool(v.context)}
    missing = [c.needs for c in plan.checks if c.needs and not held[c.needs]]
    return f"Not applicable: {_MISSING[missing[0]].format(who=who)}." if missing else None


def _read(plan: _Plan, v: _View) -> tuple[float | None, list[tuple[_Rule, _Reading]]]:
    """The mean reading oriented by the criterion's words (``None``: an empty answer)."""
    if v.words == 0 and not v.judged_calls:
        return None, [(plan.checks[0], _Reading(0.0, "the judged answer is empty"))]
    readings = [(c, c.read(v)) for c in plan.checks]
    oriented = [r.value if c.polarity > 0 else 1 - r.value for c, r in readings]
    return min(1.0, max(0.0, sum(oriented) / len(oriented))), readings


def _explain(readings: list[tuple[_Rule, _Reading]]) -> str:
    """Each reading's label and what it found, not repeating one already told."""
    told: list[str] = []
    for check, reading in readings:
        said = any(reading.found in earlier for earlier in told)
        told.append(f"{check.label}: {'as above' if said else reading.found}")
    return "; ".join(told)


def score_case(case: Case) -> Verdict:
    """Score ``case`` by the rules its criterion names; the same input gives the same verdict.
    Reward and Penalize of one trait are mirror images, as are Passes if and Fails if; an empty
    answer scores 0 whatever the criterion."""
    plan = _plan(case.criterion)
    v = _View(case)
    who = f"agent {case.agent_name!r}" if case.agent_name else "the response"
    reason = _not_applicable(plan, v, who)
    if reason:
        return Verdict(None, reason + TAIL, reason)
    value, readings = _read(plan, v)
    if plan.binary:
        score = float(value is not None and (value >= 0.5) == (plan.sign > 0))
        head = f"{who.capitalize()} {'passes' if score else 'fails'}"
    else:
        base = 0.0 if value is None else round(value, 3)
        score = base if plan.sign > 0 or value is None else round(1 - base, 3)
        head = f"Score {score:.3f} for {who}"
    body = head + ": " + _explain(readings) + "."
    return Verdict(score, body + TAIL, body)


# Above this many characters of conversation, scoring takes long enough (about 0.2 s a MiB) to
# stall every other request on the event loop, so it runs in a worker thread instead.
_INLINE_CHARS = 64 * 1024


def _size(case: Case) -> int:
    texts = (
        m["content"] if isinstance(m.get("content"), str) and not m.get("tool_calls") else str(m)
        for m in case.messages
    )
    return len(case.system or "") + sum(map(len, texts))


class HeuristicJudge:
    """The default judge: offline, instant and deterministic."""

    name = "heuristic"

    def judge_sync(self, case: Case) -> Verdict:  # a large trace's agents, in a worker thread
        return score_case(case)

    async def judge(self, case: Case) -> Verdict:
        if _size(case) > _INLINE_CHARS:
            return await asyncio.to_thread(score_case, case)
        return score_case(case)

    async def aclose(self) -> None:
        return None
