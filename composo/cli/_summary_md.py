"""A markdown summary of a run for a CI job page (GitHub's ``$GITHUB_STEP_SUMMARY`` renders it):
who judged and how the scores came, one table row per criterion, then the gates. Every value
from the data is escaped, so a criterion cannot break the table or inject markup."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from composo.cli._gates import GateOutcome
    from composo.cli._results import CriterionStats

__all__ = ["md_cell", "summary_markdown"]


def md_cell(text: object) -> str:
    """``text`` safe inside a markdown table cell: one line, pipes and HTML characters escaped."""
    import html

    flat = " ".join(str(text).split())
    return html.escape(flat, quote=False).replace("|", "\\|").replace("`", "\\`")


def _fmt(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}"


def _provenance(stats: dict[str, CriterionStats], criteria: list[str]) -> list[str]:
    """Who judged the scores and how they came (fresh, cached, resumed): a line above the
    table; a run of several judges names each."""
    from composo.cli._results import judge_text, sources_text

    judges: dict[str, int] = {}
    sources: dict[str, int] = {}
    for criterion in criteria:
        s = stats.get(criterion)
        for judge, n in (s.judges if s else {}).items():
            judges[judge] = judges.get(judge, 0) + n
        for source, n in (s.sources if s else {}).items():
            sources[source] = sources.get(source, 0) + n
    if not judges:
        return []
    if len(judges) == 1:
        who = md_cell(judge_text(next(iter(judges))))
    else:
        who = "mixed, each row names its judge: " + "; ".join(
            f"{md_cell(judge_text(j))} ({n})" for j, n in judges.items()
        )
    return [f"**Judge:** {who}. **Scores:** {md_cell(sources_text(sources))}.", ""]


def summary_markdown(
    stats: dict[str, CriterionStats], criteria: list[str], outcomes: list[GateOutcome]
) -> str:
    from composo._core.wire import is_binary
    from composo.cli._criteria import label

    failed = [o for o in outcomes if not o.passed]
    if not outcomes:
        verdict = ""
    elif failed:
        verdict = f" — ❌ {len(failed)} of {len(outcomes)} gate(s) failed"
    else:
        verdict = f" — ✅ {len(outcomes)} gate(s) passed"
    lines = [f"### Composo evaluation{verdict}", ""]
    lines += _provenance(stats, criteria)
    lines += [
        "| criterion | count | mean | pass rate | min | max | n/a | errors | gate |",
        "|---|--:|--:|--:|--:|--:|--:|--:|:-:|",
    ]
    for criterion in criteria:
        s = stats.get(criterion)
        if s is None:
            continue
        f = s.figures()
        rate = "–"
        if is_binary(criterion) and s.scores:
            rate = f"{100 * sum(1 for x in s.scores if x >= 0.5) / len(s.scores):.0f}%"
        mine = [o for o in outcomes if o.gate.criterion == criterion]
        gate = "" if not mine else ("✅" if all(o.passed for o in mine) else "❌")
        lines.append(
            f"| {md_cell(label(criterion, 60))} | {s.count} | {_fmt(f['mean'])} | {rate} | "
            f"{_fmt(f['min'])} | {_fmt(f['max'])} | {s.not_applicable} | {s.errors} | {gate} |"
        )
    if outcomes:
        lines.append("")
        for o in outcomes:
            mark = "✅" if o.passed else "❌"
            lines.append(f"- {mark} {md_cell(o.describe())}")
    return "\n".join(lines) + "\n\n"
