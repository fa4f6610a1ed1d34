"""The heuristic judge's vocabulary, as tables: what a criterion's words may name and what an
answer may show, and how a text becomes terms to compare. ``phrases("a, b c, d*")`` matches the
whole phrases ``a``, ``b c`` and any word starting with ``d``. The rules that use these live in
``_heuristic.py``."""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import lru_cache
from typing import TypeVar

_T = TypeVar("_T")
WORD = re.compile(r"[a-z0-9]+")
STOP = frozenset(
    str.split(
        """a an the and or but if then than that this these those is are was were be been being to
        of in on at by for with from as into about over under it its their there they them he she
        his her you your we our i me my do does did done not no so such very more most less least
        any all each every some can could should would will may might must has have had which who
        whom whose what when where why how also only just both either neither other others own
        same too up down out off again further once here s t"""
    )
)
# Words of a criterion that say what is judged or how, not what to look for.
NOISE = frozenset(
    str.split(
        """reward rewards penalize penalizes penalise penalises pass passes fail fails response
        responses answer answers reply replies assistant assistants agent agents model models
        output outputs message messages user users good well better best clearly clear
        appropriate appropriately directly"""
    )
)


def stem(word: str) -> str:
    """The word without a plural or tense ending."""
    for suffix in ("ing", "ed", "es", "s"):
        if len(word) > len(suffix) + 3 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def term(word: str) -> str:
    """A word's term: its stem, or ``""`` for a stop word or a single letter."""
    return "" if word in STOP or len(word) < 2 else stem(word)


def _remembered(work: Callable[[str], _T], most: int, longest: int) -> Callable[[str], _T]:
    """``work`` remembering ``most`` answers: a run repeats its words and texts (questions,
    system prompts, criteria); long ones, rare and a way to fill memory, are worked out again."""
    kept = lru_cache(maxsize=most)(work)
    return lambda text: kept(text) if len(text) <= longest else work(text)


term_of = _remembered(term, 1 << 16, 32)


def _terms_of(text: str) -> frozenset[str]:
    """The terms of ``text``: its words' stems, stop words left out."""
    return frozenset(map(term_of, WORD.findall(text.lower()))) - {""}


terms = _remembered(_terms_of, 1024, 4096)
NOISE_TERMS = frozenset(map(term, NOISE))


def numbers(text: str) -> set[str]:
    """Figures in ``text``, normalised (``1,500`` is ``1500``, ``39.0`` is ``39``)."""
    found = (n.replace(",", "") for n in NUMBER.findall(text))
    return {n.rstrip("0").rstrip(".") if "." in n else n for n in found}


def phrases(listed: str) -> re.Pattern[str]:
    """One case-insensitive pattern for comma-separated whole phrases (``*``: any ending)."""
    words = (p.strip() for p in listed.split(","))
    alts = (re.escape(p).replace(r"\ ", r"\s+").replace(r"\*", r"[\w-]*") for p in words)
    return re.compile(r"\b(?:" + "|".join(alts) + r")\b", re.IGNORECASE)


# -- what a criterion may name ------------------------------------------------------------------

# Each trait: the words that name it, and the words that name its opposite (a criterion that
# penalises the opposite rewards the trait). The rules in ``_heuristic._RULES`` use these names.
TRAITS = {
    "use of tool results": ("tool result*, tool output*", "contradict*, ignor*"),
    "citations": ("cite*, citing, citation*, attribut*", ""),
    "support by the context": (
        "source material, source*, retrieved, document*, passage*, knowledge base, faithful*, "
        "supported by, provided context, retrieved context, given context, the context",
        "hallucinat*, speculat*, unsupported, fabricat*",
    ),
    "tool use": (
        "tool*, function call*",
        "redundant, repeated, unnecessary, not offered, invent*, hallucinat*",
    ),
    "politeness": (
        "polite*, courteous*, friendly, respectful*, empath*, considerate",
        "rude*, insult*, dismissive*, condescend*, disrespect*, hostile, impolite*, sarcas*, "
        "curt, offensive",
    ),
    "apology": ("apolog*, sorry, regret*", ""),
    "a clarifying question": ("clarif*, follow-up question*, ask* a question, ask* questions", ""),
    "refusal": ("refus*, declin*", ""),
    "brevity": (
        "concise*, brief*, short*, succinct*, to the point, terse",
        "verbose, verbosity, long, lengthy, wordy, rambl*, padd*, detailed, thorough*, in depth",
    ),
    "confidence": ("confident*, decisive*, assertive", "hedg*, vague*, waffl*, noncommittal"),
    "accuracy": (
        "accura*, correct*, factual*, truthful*, true, precise*",
        "inaccura*, incorrect*, wrong, false, mislead*, made up, invent*, contradict*",
    ),
    "answering the question": (
        "answer*, address*, relevan*, on topic, on-topic, resolv*, solv*, help*, useful*, "
        "informative*, complete*, comprehensive*",
        "irrelevan*, off topic, off-topic, unhelpful, evasive*, dodg*, other than",
    ),
}
# A word that turns the trait word after it round ("not rude", "without any hallucination").
NEGATION = re.compile(
    r"\b(?:not|never|no|without(?:\s+any)?|avoid\w*|free\s+of|don't|doesn't|do\s+not|does\s+not)"
    r"\s+(?:(?!and\b|or\b|but\b)\w+\s+){0,2}$",
    re.IGNORECASE,
)
# The prefix and the judged subject, before the words that say what to look for.
SUBJECT = re.compile(
    r"^(?:rewards?|penali[sz]es?|passes\s+if|fails\s+if)\s+(?:(?:the|an?|all|any)\s+)?"
    r"(?:(?:answers?|responses?|replies|reply|assistants?|agents?|outputs?|models?)\b\s*)?"
    r"(?:(?:that|which|who|where|whose|when)\b\s*)?",
    re.IGNORECASE,
)
# "Passes if the answer (does not) names / mentions / states ... X"
CONTENT = re.compile(
    r"^(?:passes|fails|rewards?|penali[sz]es?)(?:\s+if)?\s+(?:\w+\s+){0,2}?(?:answers?|responses?"
    r"|repl(?:y|ies)|assistants?|agents?|outputs?)(?:\s+(?:that|which|who))?\s+"
    r"(?P<neg>does\s+not\s+|doesn't\s+|do\s+not\s+|don't\s+|never\s+|fails?\s+to\s+)?"
    r"(?P<verb>names?|mentions?|states?|includes?|contains?|gives?|lists?|quotes?|cites?"
    r"|provides?|specif(?:y|ies)|says?|explains?|describes?)"
    r"\s+(?P<what>(?!only\b|all\b|any\b|every\b|no\b).+)$",
    re.IGNORECASE,
)
# Verbs that ask for every word of X; the others ("explains X") for half of them.
STRICT_VERBS = ("name", "mention", "state", "include", "contain", "say", "quote")
QUOTED = re.compile(r"[\"“'‘]([^\"”'’]+)[\"”'’]")

# -- what an answer may show --------------------------------------------------------------------

RUDE = phrases(
    "calm down, read the terms, read the manual, read the docs, read the faq, next time, "
    "obviously, figure it out, not my problem, your problem, your fault, stupid, idiot*, dumb, "
    "moron*, pathetic, ridiculous, useless, whatever, deal with it, google it, i don't care, "
    "shut up, as i already said, how many times, get lost, learn to read, clueless, lazy"
)
COURTESY = phrases(
    "please, thank*, sorry, apolog*, happy to, glad to, i'm afraid, you're welcome, "
    "hope this helps, i understand"
)
APOLOGY = phrases("sorry, apolog*, i'm afraid, regret*, my mistake")
REFUSAL = re.compile(
    r"\b(?:i\s+(?:can\s*not|can't|cannot|won't|will\s+not|am\s+(?:unable|not\s+able)\s+to)"
    r"\s+(?:help|assist|provide|do\s+that|answer|share|comply|support|give|make|create|write)"
    r"|i'm\s+(?:unable|not\s+able)\s+to|sorry,?\s+(?:but\s+)?i\s+(?:can't|cannot|won't)"
    r"|as\s+an\s+ai)\b",
    re.IGNORECASE,
)
HEDGE = phrases("maybe, probably, possibly, not sure, i think, i guess, or something, perhaps")
CITATION = re.compile(
    r"\[\d+\]|\baccording to\b|\bsources?\s*:|https?://\S+|\bper (?:the|our) \w+", re.I
)
SENTENCE_END = re.compile(r"(?<=[.!?\n])")
CLARIFYING = phrases(
    "which, what, when, where, do you mean, could you, can you, would you, did you"
)
_UNITS = r"(?:seconds?|minutes?|mins?|hours?|hrs?|days?|nights?|weeks?|months?|years?)"
TIME = re.compile(
    rf"\b\d+(?:\.\d+)?\s*(?:(?:to|-|–|or|and)\s*\d+\s*)?(?:business\s+|working\s+)?{_UNITS}\b"
    rf"|\b(?:a|an|one|two|three|four|five|six|seven|eight|nine|ten|twelve|fifteen|twenty|thirty"
    rf"|forty|sixty|ninety|a\s+few|several|a\s+couple\s+of)\s+{_UNITS}\b"
    r"|\b(?:today|tomorrow|tonight|overnight|immediately|next\s+(?:week|month))\b",
    re.IGNORECASE,
)
_MONTH = r"(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*"
DATE = re.compile(
    rf"\b\d{{4}}-\d{{2}}-\d{{2}}\b|\b\d{{1,2}}(?:st|nd|rd|th)?\s+{_MONTH}\b|\b{_MONTH}\s+\d{{1,2}}\b"
    r"|\b\d{1,2}/\d{1,2}/\d{2,4}\b|\b(?:mon|tues|wednes|thurs|fri|satur|sun)day\b",
    re.IGNORECASE,
)
MONEY = re.compile(
    r"[$£€¥]\s?\d[\d,.]*|\b\d[\d,.]*\s?(?:usd|eur|gbp|dollars?|euros?|pounds?|cents?)\b", re.I
)
NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
URL = re.compile(r"https?://\S+|\bwww\.\S+", re.I)
EMAIL = re.compile(r"\b[\w.+-]{1,64}@[\w-]{1,63}\.[\w.]{2,63}\b")
PROPER_NAME = re.compile(r"(?<=[a-z0-9,;:] )[A-Z][\w-]+")
# What X in "names X" may be, by the words that name it: (words, what is looked for, pattern).
KINDS = (
    (
        phrases("time*, window, duration, how long, deadline, turnaround, period"),
        "a time frame",
        TIME,
    ),
    (phrases("date*, day, when"), "a date", DATE),
    (phrases("price*, cost*, fee*, how much, charge*"), "a price", MONEY),
    (phrases("source*, citation*, reference*, passage*"), "a source", CITATION),
    (phrases("url*, link*, website, web address"), "a link", URL),
    (phrases("e-mail*, email*"), "an email address", EMAIL),
    (phrases("number*, figure*, amount*, quantity, count, percentage"), "a number", NUMBER),
)

# -- what a conversation may hold ---------------------------------------------------------------

# Documents pasted into a turn: numbered passages, "Sources:" / "Context:" blocks, <document>.
DOCUMENT = re.compile(
    r"^[ \t]*(?:\[\d+\]|(?:sources?|context|documents?|passages?)[ \t]*:)|<document", re.I | re.M
)
# A system prompt that only sets a role or gives instructions ("You are a helpful assistant").
ROLE_ONLY = re.compile(
    r"^\s*(?:you\s+are|you're|act\s+as|your\s+(?:role|job|task)|as\s+an?|answer|respond|reply|be"
    r"|always|never|keep|do\s+not|don't)\b",
    re.IGNORECASE,
)
# "hasn't shipped", "is not included": the word denied (checked against what the context says).
DENIED = re.compile(
    r"\b(?:not|never|no\s+longer|(?:has|have|is|are|was|were|does|do|did|wo|ca)n't|cannot)"
    r"\s+(?:been\s+|be\s+|yet\s+)?(\w+)",
    re.IGNORECASE,
)
