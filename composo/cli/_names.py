"""The ready-made criteria by name: what ``-c`` accepts and how results label a criterion
(every command reads them; ``composo criteria`` lists them)."""

from __future__ import annotations

import difflib
from collections.abc import Sequence

from composo import criteria

GROUPS = ("RAG", "TOOL_USE", "AGENT", "BINARY")


def library() -> dict[str, str]:
    """Criterion name -> text, in the order the library lists them."""
    out: dict[str, str] = {}
    for group in GROUPS:
        for text in getattr(criteria, group):
            name = next(n for n in criteria.__all__ if n.islower() and getattr(criteria, n) == text)
            out[name] = text
    return out


def label(text: str, width: int = 60) -> str:
    """A short name for display: the library name, or the criterion cut to ``width``."""
    for name, value in library().items():
        if value == text:
            return name
    return text if len(text) <= width else text[: width - 1].rstrip() + "…"


def _close_name(value: str, named: dict[str, str]) -> str | None:
    """The ready-made name (or group) ``value`` looks like a typo of: one word, no spaces, so a
    criterion written out is never mistaken for one."""
    if not value or " " in value:
        return None
    choices = [*named, *GROUPS, "ALL"]
    lowered = {c.lower(): c for c in choices}
    close = difflib.get_close_matches(value.lower(), list(lowered), n=1, cutoff=0.6)
    return lowered[close[0]] if close else None


def resolve(values: Sequence[str]) -> list[str]:
    """``-c`` values (names, groups, criteria written out) as texts; ``ValueError`` if bad."""
    from composo._core.wire import check_criterion

    named = library()
    out: list[str] = []
    for value in values:
        key = value.strip()
        if key in named:
            out.append(named[key])
        elif key.upper() in (*GROUPS, "ALL") and " " not in key:
            out.extend(getattr(criteria, key.upper()))
        else:
            close = _close_name(key, named)
            if close is not None:
                raise ValueError(
                    f"-c {value!r}: no ready-made criterion by that name; did you mean "
                    f"{close!r}? (`composo criteria` lists them)"
                )
            try:
                out.append(check_criterion(value, "-c"))
            except ValueError as exc:
                raise ValueError(
                    f"{exc}; or use a name from `composo criteria` (e.g. -c rag_faithfulness)"
                ) from None
    return list(dict.fromkeys(out))
