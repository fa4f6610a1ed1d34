"""JUnit XML from a results file: one test suite per criterion (counted by the run's summary), one
test case per item."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from composo.cli._gates import item_threshold
from composo.cli._names import label
from composo.cli._results import item_name
from composo.cli._summary import CriterionStats, Summary, judge_key, kind

# Characters XML 1.0 cannot hold at all (control characters, lone surrogates, U+FFFE/U+FFFF).
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def xml_text(value: Any) -> str:
    """``value`` as text an XML document can carry (characters XML forbids become U+FFFD)."""
    return _NOT_XML.sub("\ufffd", "" if value is None else str(value))


def _case(suite: ET.Element, row: dict[str, Any], name: str, needed: float) -> bool:
    """One row's ``<testcase>``; whether it failed (scored below ``needed``)."""
    case = ET.SubElement(
        suite, "testcase", name=xml_text(item_name(row)), classname=xml_text(name), time="0"
    )
    said = {"judge": judge_key(row), "source": row.get("source")}
    judged = {k: v for k, v in said.items() if isinstance(v, str)}
    if judged:  # who made the score, and whether it came fresh, cached or resumed
        props = ET.SubElement(case, "properties")
        for prop, text in judged.items():
            ET.SubElement(props, "property", name=prop, value=xml_text(text))
    what, error = kind(row), row.get("error")
    score: Any = row.get("score")
    explanation = xml_text(row.get("explanation"))
    failed = what == "scored" and score < needed - 1e-12
    if what == "error":
        ET.SubElement(case, "error", message=xml_text(error), type="error").text = xml_text(error)
    elif what == "n/a":
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
    """Write ``path``: a test suite per criterion of the run, in its order."""
    gates = [o.gate for o in summary.outcomes]
    root = ET.Element("testsuites", name="composo evaluate")
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    found: dict[str, list[dict[str, Any]]] = {c: [] for c in summary.info.criteria}
    for row in rows:  # the run's criteria's rows, less those the summary sets aside
        if row["criterion"] in found and kind(row) != "set aside":
            found[row["criterion"]].append(row)
    for criterion, cases in found.items():
        name, needed = label(criterion, 80), item_threshold(criterion, gates)
        s = summary.criteria.get(criterion) or CriterionStats()
        suite = ET.SubElement(root, "testsuite", name=xml_text(name))
        props = ET.SubElement(suite, "properties")
        ET.SubElement(props, "property", name="criterion", value=xml_text(criterion))
        ET.SubElement(props, "property", name="threshold", value=f"{needed:g}")
        cases.sort(key=lambda r: (r["index"], item_name(r)))
        failures = sum(_case(suite, row, name, needed) for row in cases)
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
