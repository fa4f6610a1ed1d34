"""``composo report`` and the one page it writes, which ``composo view`` serves. The page's data
is plain JSON (the report inlines the conversations too, so it works from ``file://``); its own
script and style, under a content security policy, are all that runs."""

from __future__ import annotations

import argparse
import base64
import hashlib
import html
import json
import sys
from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from composo.cli import EXIT_BAD_ROWS, UsageError
from composo.cli._names import label
from composo.cli._results import CheckedRows, ResultsError, item_keys, load_results
from composo.cli._summary import CriterionStats, RunInfo, Summary, kind

_TEXT_CAP = 20_000  # one message's text shown up to this many characters
_TAG_VALUES = 12  # a tag with more distinct values than this is an id, not a group


@dataclass
class Run:
    """One results file read for the page, and its summary."""

    path: Path
    rows: list[dict[str, Any]]
    checked: CheckedRows
    info: RunInfo
    dataset: dict[int, dict[str, Any]] = field(default_factory=dict)
    dataset_note: str | None = None
    keys: list[str] = field(default_factory=list)  # each row's item name (item_keys)
    summary: Summary = field(init=False)

    def __post_init__(self) -> None:
        self.keys = item_keys(self.rows)
        problems = (self.checked.problems, self.checked.bad)
        self.summary = Summary.of(self.rows, self.info, self.path.name, problems)


def load_run(path: Path, data: Path | None = None) -> Run:
    """A results file, its run record and (when found) the dataset it was evaluated from."""
    rows, checked = load_results(path)
    if not rows:
        first = checked.problems[0].describe() if checked.problems else ""
        why = f" ({checked.bad} line(s) are not results, the first {first})" if first else ""
        raise ResultsError(f"{path} holds no result rows{why}")
    info = RunInfo.load(path) or RunInfo()
    recorded = Path(info.input) if info.input and Path(info.input).is_file() else None
    source, run = data or recorded, Run(path, rows, checked, info)
    if source is None:
        run.dataset_note = "the dataset was not found (pass --data), so conversations are not shown"
    else:
        run.dataset, run.dataset_note = _read_dataset(source, {int(r["index"]) for r in rows})
    return run


def load_runs(paths: list[Path], data: Path | None, command: str) -> list[Run]:
    """Each results file as a run; the rows each sets aside said once all are read."""
    if data is not None and not data.is_file():
        raise ResultsError(f"--data: no such file: {data}")
    runs = [load_run(path, data) for path in paths]
    for run in runs:
        run.checked.report(command)
    return runs


def _read_dataset(path: Path, wanted: set[int]) -> tuple[dict[int, dict[str, Any]], str | None]:
    from composo._data.readers import BadRow, UnreadableInput, open_records

    out: dict[int, dict[str, Any]] = {}
    try:
        with open_records(path) as records:
            for index, record in records:
                if index in wanted and not isinstance(record, BadRow):
                    out[index] = record
    except (UnreadableInput, ValueError, OSError) as exc:
        return out, f"the dataset {path.name} could not be read in full: {exc}"
    return out, None


# -- conversations as display data ----------------------------------------------------------


def _cut(text: str, cap: int) -> str:
    return text if len(text) <= cap else text[:cap] + f"… ({len(text) - cap} more characters)"


def _text(value: Any, cap: int) -> str:
    """Readable text of a content value: a string, text parts, or anything else as JSON."""
    if value is None:
        return ""
    if isinstance(value, str):
        return _cut(value, cap)
    if isinstance(value, list):
        parts = [
            p.get("text") if isinstance(p, dict) and isinstance(p.get("text"), str) else p
            for p in value
            if not (isinstance(p, dict) and p.get("type") in ("tool_use", "tool_result"))
        ]
        return _cut(" ".join(p if isinstance(p, str) else _json(p) for p in parts), cap)
    return _cut(_json(value), cap)


def _json(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(value)


def _call(name: Any, arguments: Any, cap: int) -> dict[str, str]:
    """A tool call as the page shows it: its name and arguments (as sent, or as JSON)."""
    shown = arguments if isinstance(arguments, str) else _json(arguments)
    return {"name": str(name or ""), "arguments": _cut(shown, cap)}


def _message(m: Any, cap: int) -> dict[str, Any]:
    """One message as {role, text, calls: [{name, arguments}], result_of?}."""
    if not isinstance(m, dict):
        return {"role": "?", "text": _text(m, cap), "calls": []}
    content = m.get("content")
    blocks = [b for b in _list(content) if isinstance(b, dict)]  # Anthropic's
    listed = [_function(c) for c in _list(m.get("tool_calls")) if isinstance(c, dict)]
    calls = [_call(c.get("name"), c.get("arguments"), cap) for c in listed]
    calls += [
        _call(b.get("name"), b.get("input"), cap) for b in blocks if b.get("type") == "tool_use"
    ]
    results = [_text(b.get("content"), cap) for b in blocks if b.get("type") == "tool_result"]
    text = _text(content, cap)
    out: dict[str, Any] = {"role": str(m.get("role", "?")), "text": text, "calls": calls}
    if results:
        out.update(role="tool", text=" ".join([text, *results]).strip())
    if m.get("role") == "tool" or m.get("tool_call_id") is not None:
        out["result_of"] = str(m.get("name") or m.get("tool_call_id") or "")
    return out


def _trace(trace: Any, cap: int) -> dict[str, Any] | None:
    """A multi-agent trace as a tree: {id, name, steps: [...], children: [...]}."""
    if not isinstance(trace, dict) or not isinstance(trace.get("agent_instance_by_id"), dict):
        return None
    agents: dict[str, Any] = trace["agent_instance_by_id"]

    def node(agent_id: str, seen: frozenset[str]) -> dict[str, Any]:
        agent = agents.get(agent_id)
        if not isinstance(agent, dict) or agent_id in seen:
            return {"id": agent_id, "name": "(missing agent)", "steps": [], "children": []}
        steps: list[dict[str, Any]] = []
        children: list[dict[str, Any]] = []
        interactions = agent.get("interactions")
        for step in interactions if isinstance(interactions, list) else []:
            if isinstance(step, str):
                children.append(node(step, seen | {agent_id}))
            elif isinstance(step, dict):
                said = {k: _list(step.get(f"{k}_messages")) for k in ("input", "output")}
                steps.append({k: [_trace_message(x, cap) for x in v] for k, v in said.items()})
        name = str(agent.get("name", ""))
        return {"id": agent_id, "name": name, "steps": steps, "children": children}

    return node(str(trace.get("root_agent_instance_id", "")), frozenset())


def _function(value: dict[str, Any]) -> dict[str, Any]:
    """An OpenAI tool call's or tool's ``function`` part, or the object itself (other shapes)."""
    inner = value.get("function")
    return inner if isinstance(inner, dict) else value


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _trace_message(m: Any, cap: int) -> dict[str, Any]:
    if not isinstance(m, dict):
        return {"role": "?", "text": _text(m, cap), "calls": []}
    content = m.get("content")
    out: dict[str, Any] = {"role": str(m.get("role", "assistant")), "calls": [], "text": ""}
    if isinstance(content, dict) and "parameters" in content:
        out["calls"] = [_call(content.get("name"), content["parameters"], cap)]
    elif isinstance(content, dict) and "response" in content:
        out["role"], out["text"] = "tool", _text(content.get("response"), cap)
        out["result_of"] = str(content.get("name") or content.get("id") or "")
    else:
        out["text"] = _text(content, cap)
    return out


def conversation(record: dict[str, Any] | None, cap: int = _TEXT_CAP) -> dict[str, Any] | None:
    """A dataset record as the item view shows it: messages and tools, or the agent tree."""
    if record is None:
        return None
    tree = _trace(record.get("trace"), cap) if "trace" in record else None
    if tree is not None:
        return {"trace": tree}
    messages = record.get("messages")
    if not isinstance(messages, list):
        inp, res = record.get("input"), record.get("result")
        messages = (inp if isinstance(inp, list) else [{"role": "user", "content": inp}]) + (
            res if isinstance(res, list) else [{"role": "assistant", "content": res}]
        )
    shown = [_message(m, cap) for m in messages]
    if record.get("system") is not None:
        shown.insert(0, {"role": "system", "text": _text(record["system"], cap), "calls": []})
    tools = [
        str(_function(t).get("name", "")) for t in _list(record.get("tools")) if isinstance(t, dict)
    ]
    return {"messages": shown, "tools": tools}


# -- the page's data ----------------------------------------------------------------------------


def _run_data(run: Run) -> dict[str, Any]:
    """A run as the page shows it: its summary, the dataset's note and the means by tag."""
    by_tag: dict[str, dict[str, dict[str, CriterionStats]]] = {}
    for r in run.rows:
        tags = run.dataset.get(int(r["index"]), {}).get("tags")
        if kind(r) != "scored" or not isinstance(tags, dict):
            continue
        for k, v in tags.items():
            per = by_tag.setdefault(str(k), {}).setdefault(str(v), {})
            per.setdefault(r["criterion"], CriterionStats()).add(r)
    means = {
        k: {v: {c: [s.mean, s.scored] for c, s in per.items()} for v, per in values.items()}
        for k, values in by_tag.items()
        if 2 <= len(values) <= _TAG_VALUES
    }
    return {**run.summary.page(), "dataset_note": run.dataset_note, "by_tag": means}


_COMPARED = ("criterion", "base_mean", "new_mean", "improved", "regressed", "unchanged")


def _changes(runs: list[Run]) -> list[dict[str, Any]]:
    """Each later run against the first, as ``composo compare`` measures it."""
    from composo.cli._compare import compare_rows  # only with a baseline: not for every page

    out: list[dict[str, Any]] = []
    for run in runs[1:]:
        try:
            result = compare_rows(runs[0].rows, run.rows)
        except ResultsError as exc:
            out.append({"run": run.path.name, "error": str(exc), "summary": [], "changed": []})
            continue
        summary, changed = [], []
        named = {id(r): k for r, k in zip(run.rows, run.keys, strict=True)}
        for c in result.criteria:
            lo, hi = c.interval if c.interval is not None else (None, None)
            figures = {k: getattr(c, k) for k in _COMPARED}
            summary.append(
                {**figures, "pairs": len(c.pairs), "diff": c.mean_diff, "low": lo, "high": hi}
            )
            moved = [p for p in c.pairs if abs(p.diff) > 1e-9]
            for p in moved:
                key = named.get(id(p.new), p.key)  # the item table's name (compare may use lines)
                base, new = float(p.base["score"]), float(p.new["score"])
                changed.append(
                    {"key": key, "criterion": c.criterion, "base": base, "new": new, "diff": p.diff}
                )
        changed.sort(key=lambda x: (x["diff"], x["key"]))
        out.append(
            {
                "run": run.path.name,
                "base": runs[0].path.name,
                "paired_by": result.paired_by,
                "summary": summary,
                "changed": changed,
            }
        )
    return out


def page_data(
    runs: list[Run],
    *,
    mode: str,
    title: str,
    conversations: bool = False,
    cap: int = _TEXT_CAP,
    lowest: int = 8,
) -> dict[str, Any]:
    """Everything the page's script renders. ``conversations`` embeds each item's conversation
    (the report; the viewer sends one when it is opened); ``lowest``: the lowest-scoring items
    listed per criterion."""
    from composo._core.wire import is_binary

    criteria = list(dict.fromkeys(c for run in runs for c in run.summary.criteria))
    at = {c: i for i, c in enumerate(criteria)}
    items: dict[str, dict[str, Any]] = {}
    for n, run in enumerate(runs):
        for r, key in zip(run.rows, run.keys, strict=True):
            item = items.setdefault(
                key, {"key": key, "index": int(r["index"]), "tags": {}, "runs": [{} for _ in runs]}
            )
            tags = run.dataset.get(int(r["index"]), {}).get("tags")
            if isinstance(tags, dict) and not item["tags"]:
                item["tags"] = {str(k): str(v) for k, v in tags.items()}
            # score, error, explanation, and who judged it, fresh or from the cache
            cell = [r.get("score"), r.get("error"), _cut(r.get("explanation") or "", cap)]
            cell += [r.get(k) if isinstance(r.get(k), str) else None for k in ("judge", "source")]
            item["runs"][n][str(at[r["criterion"]])] = cell
    names = " compared with ".join(run.path.name for run in reversed(runs))
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    data: dict[str, Any] = {
        "mode": mode,
        "title": title,
        "note": names + (f" · generated {stamp}" if mode == "report" else ""),
        "lowest": lowest,
        "criteria": [{"text": c, "label": label(c, 60), "binary": is_binary(c)} for c in criteria],
        "runs": [_run_data(run) for run in runs],
        "items": list(items.values()),
        "changes": _changes(runs),
        "reviews": [],
    }
    if conversations:
        data["conversations"] = {
            key: conversation(record_of(runs, item), cap) for key, item in items.items()
        }
    return data


def record_of(runs: list[Run], item: dict[str, Any]) -> dict[str, Any] | None:
    """An item's line of the dataset (the first run that has it), for its conversation."""
    found = (run.dataset.get(item["index"]) for n, run in enumerate(runs) if item["runs"][n])
    return next((record for record in found if record is not None), None)


def script_json(data: Any) -> str:
    """JSON that can sit inside a ``<script type="application/json">`` element: no ``<``, ``>``
    or ``&`` can end the element or start markup."""
    text = json.dumps(data, ensure_ascii=False, allow_nan=False)  # JSON.parse takes U+2028
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


@cache
def _asset(name: str) -> str:
    """``page.js`` or ``page.css``, as shipped in the package."""
    return (resources.files("composo.cli") / "_page_static" / name).read_text(encoding="utf-8")


def _digest(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


def page_policy() -> str:
    """What the page may do: run its own script and style, fetch from where it was served (the
    viewer's answers; a file has nowhere to fetch from), show data: images; nothing else."""
    return (
        f"default-src 'none'; script-src {_digest(_asset('page.js'))}; "
        f"style-src {_digest(_asset('page.css'))}; img-src data:; connect-src 'self'; "
        "base-uri 'none'; form-action 'none'"
    )


_ICON = (  # the page's tab icon: a green square
    "data:image/svg+xml,%3Csvg xmlns='http://www.w3.org/2000/svg' viewBox='0 0 16 16'%3E"
    "%3Crect width='16' height='16' rx='4' fill='%2315803d'/%3E%3C/svg%3E"
)


def page_html(data: dict[str, Any]) -> str:
    """The whole page: the data in a JSON element, the script and style inline."""
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        f'<meta http-equiv="Content-Security-Policy" content="{page_policy()}">'
        f'<link rel="icon" href="{_ICON}"><title>{html.escape(str(data["title"]))}</title>'
        f"<style>{_asset('page.css')}</style></head><body>"
        '<main id="composo-app"><noscript>This page is drawn by its own script, inlined; allow '
        "scripts for it to see the results.</noscript></main>"
        '<script type="application/json" id="composo-data">'
        f"{script_json(data)}</script><script>{_asset('page.js')}</script></body></html>\n"
    )


# -- composo report ---------------------------------------------------------------------------

_ITEM_TEXT_CAP = 4000  # a message or explanation kept in the page up to this many characters


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("results", type=Path, metavar="OUT.jsonl", help="`composo evaluate` output")
    parser.add_argument(
        "-o",
        "--output",
        type=Path,
        default=Path("report.html"),
        metavar="REPORT.html",
        help="where to write the report (default: %(default)s)",
    )
    parser.add_argument("--title", default="Evaluation report", metavar="TEXT", help="page title")
    parser.add_argument(
        "--lowest",
        type=int,
        default=8,
        metavar="N",
        help="lowest-scoring items listed per criterion (default: %(default)s)",
    )
    parser.add_argument(
        "--data",
        type=Path,
        metavar="INPUT.jsonl",
        help="the evaluated dataset, for the conversations and the breakdown by tag (default: "
        "the INPUT `composo evaluate` recorded next to the results)",
    )
    parser.add_argument(
        "--baseline",
        type=Path,
        metavar="BASE.jsonl",
        help="an earlier run's results, shown beside this one with what changed",
    )


def run(args: argparse.Namespace) -> int:
    if args.lowest < 0:
        raise UsageError("--lowest must be 0 or more")
    paths = [args.results] if args.baseline is None else [args.baseline, args.results]
    runs = load_runs(paths, args.data, "report")  # a ResultsError: exit 2
    data = page_data(
        runs,
        mode="report",
        title=args.title,
        conversations=True,
        cap=_ITEM_TEXT_CAP,
        lowest=args.lowest,
    )
    refused = [c["error"] for c in data["changes"] if "error" in c]
    if refused:  # a baseline that shares nothing with the run says nothing about it
        raise UsageError(f"--baseline: {refused[0]}")
    args.output.write_text(page_html(data), encoding="utf-8")
    print(f"wrote {args.output}", file=sys.stderr)
    return EXIT_BAD_ROWS if any(r.checked.bad for r in runs) else 0
