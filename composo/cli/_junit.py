"""JUnit XML from a results file, so CI systems list each item × criterion as a test case: one
test suite per criterion, a ``<failure>`` carrying the judge's explanation when an item scored
below what it needed, an ``<error>`` when it could not be evaluated, ``<skipped>`` when the
criterion did not apply; each case's properties name the judge that scored it and whether the
score came fresh or from the cache. The suites, their order, counts and thresholds come from the
run's :class:`~composo.cli._summary.Summary` (its criteria, figures and gates); the cases from the
rows, less those the summary sets aside (scores that are not numbers from 0 to 1)."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from composo.cli._summary import Summary

__all__ = ["write_junit", "xml_text"]

# Characters XML 1.0 cannot hold at all (control characters, lone surrogates, U+FFFE/U+FFFF).
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def xml_text(value: Any) -> str:
    """``value`` as text an XML document can carry (characters XML forbids become U+FFFD)."""
    return _NOT_XML.sub("\ufffd", "" if value is None else str(value))


def _item(row: dict[str, Any]) -> str:
    return str(row["id"]) if row.get("id") is not None else f"line {row['index'] + 1}"


def _provenance(row: dict[str, Any]) -> dict[str, str]:
    """A row's judge (with the platform's model core) and where its score came from."""
    from composo.cli._provenance import judge_key

    said = {"judge": judge_key(row), "source": row.get("source")}
    return {k: v for k, v in said.items() if isinstance(v, str)}


def _by_criterion(rows: Iterable[dict[str, Any]], criteria: list[str]) -> dict[str, list[Any]]:
    """The run's criteria's rows, in order, less the scores the summary sets aside."""
    from composo.cli._results import valid_score

    out: dict[str, list[dict[str, Any]]] = {c: [] for c in criteria}
    for row in rows:
        score, scored = row.get("score"), row.get("error") is None
        set_aside = scored and isinstance(score, (int, float)) and not valid_score(score)
        if row["criterion"] in out and not set_aside:
            out[row["criterion"]].append(row)
    for found in out.values():
        found.sort(key=lambda r: (r["index"], _item(r)))
    return out


def _case(suite: ET.Element, row: dict[str, Any], name: str, needed: float) -> bool:
    """One row's ``<testcase>``; whether it failed (scored below ``needed``)."""
    case = ET.SubElement(
        suite, "testcase", name=xml_text(_item(row)), classname=xml_text(name), time="0"
    )
    judged = _provenance(row)
    if judged:  # who made the score, and whether it came fresh, cached or resumed
        props = ET.SubElement(case, "properties")
        for prop, text in judged.items():
            ET.SubElement(props, "property", name=prop, value=xml_text(text))
    score, error = row.get("score"), row.get("error")
    explanation = xml_text(row.get("explanation"))
    failed = error is None and isinstance(score, (int, float)) and score < needed - 1e-12
    if error is not None:
        ET.SubElement(case, "error", message=xml_text(error), type="error").text = xml_text(error)
    elif not isinstance(score, (int, float)):
        ET.SubElement(case, "skipped", message="not applicable: " + explanation[:200])
    elif failed:
        failure = ET.SubElement(case, "failure", type="ScoreBelowThreshold")
        failure.set("message", f"score {score:g} below {needed:g}")
        failure.text = explanation
    if explanation and error is None:
        made = ", ".join(f"{k} {v}" for k, v in judged.items())
        text = f"score: {score}" + (f" ({made})" if made else "") + f"\n{explanation}"
        ET.SubElement(case, "system-out").text = text
    return failed


def write_junit(path: Path, rows: Iterable[dict[str, Any]], summary: Summary) -> None:
    """Write ``path``: ``<testsuites>`` with one ``<testsuite>`` per criterion of the run (in
    its order); rows of other criteria are left out."""
    from composo.cli._criteria import label
    from composo.cli._gates import item_threshold
    from composo.cli._summary import CriterionStats

    gates = [o.gate for o in summary.outcomes]
    root = ET.Element("testsuites", name="composo evaluate")
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for criterion, found in _by_criterion(rows, summary.info.criteria).items():
        name, needed = label(criterion, 80), item_threshold(criterion, gates)
        s = summary.criteria.get(criterion) or CriterionStats()
        suite = ET.SubElement(root, "testsuite", name=xml_text(name))
        props = ET.SubElement(suite, "properties")
        ET.SubElement(props, "property", name="criterion", value=xml_text(criterion))
        ET.SubElement(props, "property", name="threshold", value=f"{needed:g}")
        failures = sum(_case(suite, row, name, needed) for row in found)
        counts = dict(tests=s.count, failures=failures, errors=s.errors, skipped=s.not_applicable)
        for key, value in counts.items():
            suite.set(key, str(value))
            totals[key] += value
        suite.set("time", "0")
    for key, value in totals.items():
        root.set(key, str(value))
    root.set("time", "0")
    ET.indent(root)
    tmp = path.with_name(path.name + ".tmp")
    ET.ElementTree(root).write(tmp, encoding="utf-8", xml_declaration=True)
    tmp.replace(path)
