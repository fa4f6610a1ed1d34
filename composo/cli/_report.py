"""``composo report``: turn a results file into one self-contained HTML page (inline CSS and SVG,
no scripts, nothing fetched), readable at a glance: per criterion the score distribution,
not-applicable and error counts, and the lowest-scoring conversations with their explanations.
With ``--baseline`` an earlier run is shown beside it: both distributions, the paired change with
its interval, and the items that regressed most with both explanations."""

from __future__ import annotations

import argparse
import itertools
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from composo.cli._compare import Comparison, CriterionComparison
    from composo.cli._results import RowProblem
    from composo.cli._summary import CriterionStats, RunInfo

__all__ = ["add_arguments", "render", "run"]

BINS = 10
_LOWEST = 8
_ERRORS_SHOWN = 20


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
    parser.add_argument("--title", default="Evaluation report", help="the page title")
    parser.add_argument(
        "--lowest",
        type=int,
        default=_LOWEST,
        metavar="N",
        help="lowest-scoring conversations shown per criterion (default: %(default)s)",
    )
    parser.add_argument(
        "--data",
        type=Path,
        metavar="INPUT.jsonl",
        help="the evaluated dataset, for the questions and answers of the lowest scores and the "
        "breakdown by tag (default: the INPUT `composo evaluate` recorded next to the results)",
    )
    parser.add_argument(
        "--items",
        action="store_true",
        help="add every item in a table that can be searched, sorted and filtered, and each "
        "item's conversation and explanations (an inline script; the page still loads nothing)",
    )
    parser.add_argument(
        "--baseline",
        type=Path,
        metavar="BASE.jsonl",
        help="an earlier run's results, shown side by side with this one",
    )


@dataclass
class _Criterion:
    """What the report shows for one criterion, gathered in one pass over the rows."""

    text: str
    stats: CriterionStats
    bins: list[int] = field(default_factory=lambda: [0] * BINS)
    lowest: list[tuple[float, int, str, dict[str, Any]]] = field(default_factory=list)


def _collect(
    rows: Any, keep: int
) -> tuple[dict[str, _Criterion], list[dict[str, Any]], set[int], int]:
    import heapq

    from composo.cli._summary import CriterionStats

    out: dict[str, _Criterion] = {}
    errors: list[dict[str, Any]] = []
    items: set[int] = set()
    error_total = 0
    for n, row in enumerate(rows):
        items.add(row["index"])
        entry = out.get(row["criterion"])
        if entry is None:
            entry = out[row["criterion"]] = _Criterion(row["criterion"], CriterionStats())
        entry.stats.add(row)
        if row.get("error") is not None:
            error_total += 1
            _add_error(errors, row)
            continue
        score = row.get("score")
        if not isinstance(score, (int, float)):
            continue
        entry.bins[min(int(score * BINS), BINS - 1)] += 1
        # a max-heap (negated) of the `keep` lowest scores; `n` breaks ties by file order
        heapq.heappush(entry.lowest, (-float(score), -n, str(row["index"]), _slim(row)))
        if len(entry.lowest) > keep:
            heapq.heappop(entry.lowest)
    return out, errors, items, error_total


def _add_error(errors: list[dict[str, Any]], row: dict[str, Any]) -> None:
    """Group an item's failures: one line per item and error, listing the criteria it hit."""
    for seen in errors:
        if seen["index"] == row["index"] and seen["error"] == row["error"]:
            seen["criteria"].append(row["criterion"])
            return
    if len(errors) < _ERRORS_SHOWN:
        errors.append({**_slim(row), "error": row["error"], "criteria": [row["criterion"]]})


def _item(row: dict[str, Any]) -> str:
    """The item's own id, else its line in the dataset (``index`` counts lines from 0)."""
    return str(row["id"]) if row.get("id") is not None else f"line {row['index'] + 1}"


def _rank(entry: _Criterion) -> tuple[bool, float]:
    mean = entry.stats.figures()["mean"]
    return (mean is None, mean or 0.0)


def _slim(row: dict[str, Any]) -> dict[str, Any]:
    from composo.cli._provenance import judge_key

    return {
        **{k: row.get(k) for k in ("index", "id", "score", "explanation")},
        "judge": judge_key(row),
    }


_SHOWN_CHARS = 280  # question and answer shown in full up to this; longer ones fold
_KEPT_CHARS = 4000  # beyond this a folded text is cut (a report stays small)
_TAG_VALUES = 12  # a tag with more distinct values than this is an id, not a group


def _text(content: Any) -> str:
    """The readable text of a message's content: a string or a list of text parts."""
    if isinstance(content, list):
        return " ".join(_text(p.get("text") if isinstance(p, dict) else p) for p in content)
    return "" if content is None else str(content)


def _question_answer(item: dict[str, Any]) -> tuple[str, str]:
    """The last user turn and the judged (last assistant) answer of a dataset line."""
    messages = item.get("messages")
    if not isinstance(messages, list):
        inp, res = item.get("input"), item.get("result")
        messages = (inp if isinstance(inp, list) else [{"role": "user", "content": inp}]) + (
            res if isinstance(res, list) else [{"role": "assistant", "content": res}]
        )
    turns = [m for m in messages if isinstance(m, dict)]
    answer_at = max((i for i, m in enumerate(turns) if m.get("role") == "assistant"), default=None)
    answer = ""
    if answer_at is not None:
        m = turns[answer_at]
        answer = _text(m.get("content"))
        listed = m.get("tool_calls")
        listed = listed if isinstance(listed, list) else []
        calls = [c.get("function", c) for c in listed if isinstance(c, dict)]
        called = ", ".join(
            f"{c.get('name')}({c.get('arguments', '')})" for c in calls if isinstance(c, dict)
        )
        if called:
            answer = (answer + " " if answer else "") + f"[tool calls: {called}]"
    before = turns[:answer_at] if answer_at is not None else turns
    users = [_text(m.get("content")) for m in before if m.get("role") == "user"]
    return (users[-1] if users else ""), answer


@dataclass
class _Dataset:
    """What the report needs from the evaluated dataset: each line's tags, and the question
    and answer of the lines it shows."""

    tags: dict[int, dict[str, str]]
    texts: dict[int, tuple[str, str]]

    @classmethod
    def read(cls, path: Path, wanted: set[int]) -> _Dataset:
        from composo.cli._results import json_object

        tags: dict[int, dict[str, str]] = {}
        texts: dict[int, tuple[str, str]] = {}
        with path.open("rb") as f:
            for index, raw in enumerate(f):
                item = json_object(raw)
                if item is None:
                    continue
                if isinstance(item.get("tags"), dict):
                    tags[index] = {str(k): str(v) for k, v in item["tags"].items()}
                if index in wanted:
                    q, a = _question_answer(item)
                    texts[index] = (q[:_KEPT_CHARS], a[:_KEPT_CHARS])
        return cls(tags, texts)


def _folded(text: str, label: str) -> str:
    """``text`` escaped; a long one shows its start and folds the rest."""
    if not text:
        return '<span class="sub">(empty)</span>'
    if len(text) <= _SHOWN_CHARS:
        return _esc(text)
    return (
        f"{_esc(text[: _SHOWN_CHARS - 20].rstrip())}…<details><summary>full {label}</summary>"
        f'<div class="qa">{_esc(text)}</div></details>'
    )


def run(args: argparse.Namespace) -> int:
    from composo.cli._results import EXIT_BAD_ROWS, CheckedRows

    if not args.results.is_file():
        print(f"composo report: error: no such file: {args.results}", file=sys.stderr)
        return 2
    if args.lowest < 0:
        print("composo report: error: --lowest must be 0 or more", file=sys.stderr)
        return 2
    checked = CheckedRows(args.results)
    try:
        criteria, errors, items, error_total = _collect(checked, args.lowest)
    except OSError as exc:
        print(f"composo report: error: {exc}", file=sys.stderr)
        return 2
    if not criteria:
        first = (
            f" ({checked.bad} line(s) are not results, the first {checked.problems[0].describe()})"
        )
        print(
            f"composo report: error: {args.results} holds no result rows"
            f"{first if checked.bad else ''}",
            file=sys.stderr,
        )
        return 2
    checked.report("report")
    problems, bad = checked.problems, checked.bad
    baseline: _Baseline | None = None
    if args.baseline is not None:
        from composo.cli._compare import CompareError, compare_rows, load

        try:
            base_rows, base_bad = load(args.baseline, "--baseline", "report")
            comparison = compare_rows(base_rows, checked)
        except CompareError as exc:
            print(f"composo report: error: {exc}", file=sys.stderr)
            return 2
        bad += base_bad
        base_criteria, _, base_items, _ = _collect(iter(base_rows), 0)
        baseline = _Baseline(args.baseline.name, base_criteria, len(base_items), comparison)
    from composo.cli._summary import RunInfo

    info = RunInfo.load(args.results)
    data_path = args.data
    if data_path is None and info is not None and info.input:
        data_path = Path(info.input) if Path(info.input).is_file() else None
    elif data_path is not None and not data_path.is_file():
        print(f"composo report: error: --data: no such file: {data_path}", file=sys.stderr)
        return 2
    wanted = {int(r["index"]) for c in criteria.values() for *_, r in c.lowest}
    dataset = _Dataset.read(data_path, wanted) if data_path is not None else None
    # weakest first: the page opens on what needs attention
    ranked = dict(sorted(criteria.items(), key=lambda kv: _rank(kv[1])))
    app: tuple[str, str] = ("", "")
    if args.items:
        made = _items_app(args.results, args.baseline, data_path, args.title)
        if made is None:
            return 2
        app = made
    page = render(
        ranked,
        errors,
        len(items),
        error_total,
        args.title,
        args.results.name,
        baseline,
        info=info,
        dataset=dataset,
        rows=CheckedRows(args.results) if dataset is not None else None,
        problems=(problems, checked.bad),
        app=app,
    )
    args.output.write_text(page, encoding="utf-8")
    print(f"wrote {args.output}", file=sys.stderr)
    return EXIT_BAD_ROWS if bad else 0


# -- rendering ----------------------------------------------------------------------------------

_CSS = """
:root{--ink:#1d2433;--mute:#5b6478;--line:#e3e6ee;--bg:#f6f7fb;--card:#fff;--bad:#c2410c;
--good:#15803d;--na:#94a3b8;--err:#b91c1c}
*{box-sizing:border-box}body{margin:0;font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,
sans-serif;color:var(--ink);background:var(--bg)}main{max-width:1100px;margin:0 auto;padding:28px}
h1{font-size:26px;margin:0 0 4px}h2{font-size:18px;margin:0}h3{font-size:14px;margin:18px 0 8px;
color:var(--mute);text-transform:uppercase;letter-spacing:.04em}.sub{color:var(--mute)}
.totals{display:flex;gap:12px;flex-wrap:wrap;margin:18px 0 26px}.tot{background:var(--card);
border:1px solid var(--line);border-radius:10px;padding:10px 16px;min-width:120px}
.run{background:var(--card);border:1px solid var(--line);border-radius:10px;padding:10px 16px;
margin:16px 0 0}.run.dev{border-color:#d99f06;background:#fffbeb}
.run td{border:0;padding:2px 10px 2px 0}
.qa{margin:0 0 4px;max-width:420px;overflow-wrap:anywhere}.na{color:#64748b}.nodata{margin:4px 0}
.tot b{display:block;font-size:22px}.card{background:var(--card);border:1px solid var(--line);
border-radius:12px;padding:20px 22px;margin:0 0 22px}.crit{color:var(--mute);font-size:13px;
margin:4px 0 14px}.row{display:flex;gap:26px;flex-wrap:wrap;align-items:flex-start}
table{border-collapse:collapse;width:100%}td,th{text-align:left;padding:6px 8px;
border-bottom:1px solid var(--line);vertical-align:top;font-size:14px}th{color:var(--mute);
font-weight:600}.stats td{border:0;padding:2px 10px 2px 0}.stats td:first-child{color:var(--mute)}
.pill{display:inline-block;min-width:44px;text-align:center;border-radius:999px;padding:1px 8px;
color:#fff;font-weight:600;font-size:13px}.id{font-family:ui-monospace,Menlo,monospace;
font-size:13px;white-space:nowrap}.expl{color:#333}.err{color:var(--err)}
details summary{cursor:pointer;color:var(--mute)}
svg text{font:11px system-ui,sans-serif;fill:#5b6478}.legend{margin-top:10px;color:var(--mute);
font-size:13px}.key{display:inline-block;width:11px;height:11px;border-radius:2px;
margin:0 5px 0 14px;vertical-align:-1px}.card h2+.row{margin-top:14px}
"""


def _esc(text: Any) -> str:
    import html

    return html.escape("" if text is None else str(text), quote=True)


def _color(score: float) -> str:
    """Red (0) to amber to green (1), so a glance finds the weak spots."""
    stops = [(0.0, (194, 65, 12)), (0.5, (217, 159, 6)), (1.0, (21, 128, 61))]
    for (x0, c0), (x1, c1) in itertools.pairwise(stops):
        if score <= x1:
            t = (score - x0) / (x1 - x0)
            r, g, b = (round(a + (b_ - a) * t) for a, b_ in zip(c0, c1, strict=True))
            return f"rgb({r},{g},{b})"
    return "rgb(21,128,61)"


def _histogram(entry: _Criterion) -> str:
    """Inline SVG: the score distribution (ten bins, or 0 and 1 for a binary criterion), then
    not-applicable and error bars in their own colours."""
    from composo._core.wire import is_binary

    # (count, colour, label under the bar, tooltip)
    bars: list[tuple[int, str, str, str]] = []
    if is_binary(entry.text):
        bars += [
            (entry.bins[0], _color(0.0), "0", "score 0"),
            (entry.bins[-1], _color(1.0), "1", "score 1"),
        ]
    else:
        for i, n in enumerate(entry.bins):
            low, high = i / BINS, (i + 1) / BINS
            bars.append((n, _color((i + 0.5) / BINS), "", f"scores {low:.1f} to {high:.1f}"))
    scored = len(bars)
    # Not-applicable and error counts are written beside the chart, not drawn on its scale: a
    # tall n/a bar would flatten the scores a reader came to see.
    top = max(b[0] for b in bars) or 1
    width, height, pad = 520, 170, 22
    slot = (width - 8) / BINS
    base = pad + height
    parts = [
        f'<svg viewBox="0 0 {width} {height + 2 * pad}" width="{width}" height="{height + 2 * pad}"'
        ' role="img" aria-label="score distribution">'
    ]
    wide = (BINS / scored) if scored < BINS else 1.0  # binary bars share the score area
    x = 4.0
    for n, fill, label, tip in bars:
        w = slot * wide
        h = 0 if not n else max(2.0, height * n / top)
        parts.append(
            f'<rect x="{x + 1.5:.1f}" y="{base - h:.1f}" width="{w - 3:.1f}" height="{h:.1f}" '
            f'rx="2" fill="{fill}"><title>{tip}: {n}</title></rect>'
        )
        if n:
            parts.append(
                f'<text x="{x + w / 2:.1f}" y="{base - h - 4:.1f}" text-anchor="middle">{n}</text>'
            )
        if label:
            parts.append(
                f'<text x="{x + w / 2:.1f}" y="{base + 15}" text-anchor="middle">{label}</text>'
            )
        x += w
    if scored == BINS:  # an axis under the ten bins
        for tick, anchor in ((0, "start"), (5, "middle"), (10, "end")):
            parts.append(
                f'<text x="{4 + tick * slot:.1f}" y="{base + 15}" text-anchor="{anchor}">'
                f"{tick / BINS:.1f}</text>"
            )
    parts.append(
        f'<line x1="0" x2="{width}" y1="{base + 0.5}" y2="{base + 0.5}" stroke="#cbd2df"/></svg>'
    )
    if not entry.stats.scores:
        parts.append('<div class="sub nodata">no scored items: no distribution to show</div>')
    s = entry.stats
    parts.append(
        f'<div class="legend">{len(s.scores)} scored · <span class="na">{s.not_applicable} not '
        f"applicable</span> (the criterion did not apply) · "
        f'<span class="{"err" if s.errors else ""}">{s.errors} error(s)</span> (not judged)</div>'
    )
    return "".join(parts)


def _pill(score: float | None, missing: str = "n/a") -> str:
    """A score's coloured pill; ``missing`` says why there is none: ``"n/a"`` (the criterion did
    not apply) or ``"no data"`` (nothing was scored to average)."""
    if score is None:
        title = "not applicable" if missing == "n/a" else "no scored items"
        return (
            f'<span class="pill" style="background:#94a3b8" title="{title}">{_esc(missing)}</span>'
        )
    return f'<span class="pill" style="background:{_color(score)}">{score:.2f}</span>'


def _explanation(text: str | None) -> str:
    text = text or ""
    if len(text) <= 320:
        return f'<span class="expl">{_esc(text)}</span>'
    return (
        f'<span class="expl">{_esc(text[:300])}…</span><details><summary>full explanation'
        f'</summary><span class="expl">{_esc(text)}</span></details>'
    )


def _label(text: str) -> str:
    from composo.cli._criteria import label

    return label(text, 70)


_BANDS = (
    ("below 0.4", 0, 4, "#c2410c"),
    ("0.4 to 0.7", 4, 7, "#d99f06"),
    ("0.7 and up", 7, 10, "#15803d"),
)


def _strip(entry: _Criterion) -> str:
    """One stacked bar of the scored items: how many low, middling, high (not-applicable and
    error counts have their own columns)."""
    parts = [(name, sum(entry.bins[a:b]), color) for name, a, b, color in _BANDS]
    total = sum(n for _, n, _ in parts) or 1
    width, x, rects = 260.0, 0.0, []
    for name, n, color in parts:
        if n:
            w = width * n / total
            rects.append(
                f'<rect x="{x:.1f}" y="0" width="{w:.1f}" height="16" fill="{color}">'
                f"<title>{name}: {n}</title></rect>"
            )
            x += w
    return (
        f'<svg viewBox="0 0 {width:.0f} 16" width="{width:.0f}" height="16">{"".join(rects)}</svg>'
    )


def _overview(criteria: dict[str, _Criterion], baseline: _Baseline | None = None) -> str:
    rows = []
    for entry in criteria.values():
        mean = entry.stats.figures()["mean"]
        errors = entry.stats.errors
        extra = ""
        if baseline is not None:
            extra = _baseline_cells(entry.text, baseline)
        rows.append(
            f"<tr><td>{_esc(_label(entry.text))}</td><td>{_pill(mean, 'no data')}</td>{extra}"
            f"<td>{_strip(entry)}</td><td>{entry.stats.not_applicable}</td>"
            f"<td>{f'<span class=err>{errors}</span>' if errors else 0}</td></tr>"
        )
    heads = "<th>baseline</th><th>change (95% interval)</th>" if baseline is not None else ""
    legend = " ".join(
        f'<span class="key" style="background:{c}"></span>{_esc(n)}'
        for n, c in [(b[0], b[3]) for b in _BANDS]
    )
    legend += (
        " · scores bar: scored items only; n/a: the criterion did not apply; no data: nothing "
        "scored"
    )
    return (
        '<section class="card"><h2>At a glance</h2><table><tr><th>criterion</th><th>mean</th>'
        f"{heads}<th>scores</th><th>n/a</th><th>errors</th></tr>{''.join(rows)}</table>"
        f'<div class="legend">{legend}</div></section>'
    )


def _card(
    entry: _Criterion, baseline: _Baseline | None = None, dataset: _Dataset | None = None
) -> str:
    s = entry.stats
    f = s.figures()

    def num(v: float | None) -> str:
        return "–" if v is None else f"{v:.2f}"

    stats = "".join(
        f"<tr><td>{k}</td><td><b>{v}</b></td></tr>"
        for k, v in [
            ("scored", len(s.scores)),
            ("mean", num(f["mean"])),
            ("median", num(f["median"])),
            ("min", num(f["min"])),
            ("max", num(f["max"])),
            ("not applicable", s.not_applicable),
            ("errors", f'<span class="err">{s.errors}</span>' if s.errors else 0),
        ]
    )
    lowest = sorted(entry.lowest, key=lambda t: (-t[0], -t[1]))

    def qa(r: dict[str, Any]) -> str:
        if dataset is None:
            return ""
        found = dataset.texts.get(int(r["index"]))
        if found is None:
            return '<td class="sub">not in the dataset</td>'
        q, a = found
        return (
            f'<td><div class="qa"><b>Q</b> {_folded(q, "question")}</div>'
            f'<div class="qa"><b>A</b> {_folded(a, "answer")}</div></td>'
        )

    mixed = len(s.judges) > 1  # several judges scored this criterion: say whose each score is

    def judged(r: dict[str, Any]) -> str:
        return f'<div class="sub">{_esc(r.get("judge") or "unknown")}</div>' if mixed else ""

    rows = "".join(
        f'<tr><td class="id">{_esc(_item(r))}'
        f"</td><td>{_pill(r['score'])}{judged(r)}</td>{qa(r)}"
        f"<td>{_explanation(r['explanation'])}</td></tr>"
        for *_, r in lowest
    )
    qa_head = "<th>question and answer</th>" if dataset is not None else ""
    low = (
        f"<h3>Lowest scores</h3><table><tr><th>item</th><th>score</th>{qa_head}<th>why</th></tr>"
        f"{rows}</table>"
        if rows
        else ""
    )
    name = _label(entry.text)
    full = f'<div class="crit">{_esc(entry.text)}</div>' if name != entry.text else ""
    side = _baseline_side(entry.text, baseline) if baseline is not None else ""
    here = '<div class="sub">this run</div>' if side else ""
    return (
        f'<section class="card"><h2>{_esc(name)}</h2>{full}<div class="row"><div>{here}'
        f"{_histogram(entry)}</div>{side}"
        f'<table class="stats" style="width:auto">{stats}</table></div>{low}'
        f"{_regressed(entry.text, baseline) if baseline is not None else ''}</section>"
    )


# -- side by side with a baseline ------------------------------------------------------------


@dataclass
class _Baseline:
    """The earlier run: its per-criterion figures and the paired comparison with this run."""

    source: str
    criteria: dict[str, _Criterion]
    items: int
    comparison: Comparison

    def entry(self, criterion: str) -> CriterionComparison | None:
        return next((c for c in self.comparison.criteria if c.criterion == criterion), None)


def _signed(value: float | None) -> str:
    return "–" if value is None else f"{value:+.3f}"


def _baseline_cells(criterion: str, baseline: _Baseline) -> str:
    base = baseline.criteria.get(criterion)
    if base is None:
        return '<td class="sub">not in baseline</td><td></td>'
    mean = base.stats.figures()["mean"]
    c = baseline.entry(criterion)
    if c is None or c.interval is None:
        return f"<td>{_pill(mean, 'no data')}</td><td>–</td>"
    lo, hi = c.interval
    cls = "err" if hi < 0 else ""
    return (
        f"<td>{_pill(mean, 'no data')}</td><td><span class='{cls}'>{_signed(c.mean_diff)}</span> "
        f'<span class="sub">[{_signed(lo)}, {_signed(hi)}] over {len(c.pairs)}; '
        f"{c.improved} up, {c.regressed} down</span></td>"
    )


def _baseline_side(criterion: str, baseline: _Baseline) -> str:
    base = baseline.criteria.get(criterion)
    if base is None:
        return '<div class="sub">baseline: not evaluated for this criterion</div>'
    f = base.stats.figures()
    mean = "–" if f["mean"] is None else f"{f['mean']:.2f}"
    return (
        f'<div><div class="sub">baseline ({_esc(baseline.source)}), mean {mean}</div>'
        f"{_histogram(base)}</div>"
    )


def _regressed(criterion: str, baseline: _Baseline, shown: int = 8) -> str:
    c = baseline.entry(criterion)
    if c is None:
        return ""
    rows = "".join(
        f'<tr><td class="id">{_esc(p.key)}</td><td>{_pill(float(p.base["score"]))} → '
        f"{_pill(float(p.new['score']))}</td><td><b>baseline:</b> "
        f"{_explanation(p.base.get('explanation'))}<br><b>this run:</b> "
        f"{_explanation(p.new.get('explanation'))}</td></tr>"
        for p in c.worst(shown)
    )
    if not rows:
        return ""
    return (
        "<h3>Regressed most since the baseline</h3><table><tr><th>item</th><th>score</th>"
        f"<th>why</th></tr>{rows}</table>"
    )


def render(
    criteria: dict[str, _Criterion],
    errors: list[dict[str, Any]],
    items: int,
    error_total: int,
    title: str,
    source: str,
    baseline: _Baseline | None = None,
    *,
    info: RunInfo | None = None,
    dataset: _Dataset | None = None,
    rows: Any = None,
    problems: tuple[list[RowProblem], int] = ([], 0),
    app: tuple[str, str] = ("", ""),
) -> str:
    """The whole page as one string; ``app`` is the item table's head and body parts."""
    from datetime import datetime, timezone

    scored = sum(len(c.stats.scores) for c in criteria.values())
    na = sum(c.stats.not_applicable for c in criteria.values())
    totals = "".join(
        f'<div class="tot"><b>{v}</b>{k}</div>'
        for k, v in [
            ("conversations", items),
            ("criteria", len(criteria)),
            ("scored", scored),
            ("not applicable", na),
            ("errors", f'<span class="err">{error_total}</span>' if error_total else 0),
        ]
        + ([("rows set aside", f'<span class="err">{problems[1]}</span>')] if problems[1] else [])
    )
    cards = "".join(_card(c, baseline, dataset) for c in criteria.values())
    by_tag = _by_tag(criteria, dataset, rows) if dataset is not None and rows is not None else ""
    error_rows = "".join(
        f'<tr><td class="id">{_esc(_item(r))}</td>'
        f"<td>{'<br>'.join(_esc(_label(c)) for c in r['criteria'])}</td>"
        f'<td class="err">{_esc(r["error"])}</td></tr>'
        for r in errors
    )
    error_block = (
        f'<section class="card"><h2>Errors</h2><p class="sub">{error_total} pair(s) could not '
        "be evaluated; re-run <code>composo evaluate</code> with the same <code>-o</code> to "
        f"retry them.</p><table><tr><th>item</th><th>criterion</th><th>error</th></tr>"
        f"{error_rows}</table></section>"
        if error_rows
        else ""
    )
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    against = ""
    if baseline is not None:
        against = (
            f" compared with {_esc(baseline.source)} ({baseline.items} conversations; items "
            f"paired by {baseline.comparison.paired_by})"
        )
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        f"{app[0]}<title>{_esc(title)}</title><style>{_CSS}</style></head>"
        "<body><main>"
        f'<h1>{_esc(title)}</h1><div class="sub">{_esc(source)}{against} · generated {stamp}'
        f"</div>{_run_header(info, criteria)}"
        f'<div class="totals">{totals}</div>{_overview(criteria, baseline)}{by_tag}{cards}'
        f"{error_block}{_set_aside(*problems)}"
        f"</main>{app[1]}</body></html>\n"
    )


_PROBLEMS_SHOWN = 50
_ITEM_TEXT_CAP = 4000  # a message or explanation kept in the page up to this many characters


def _items_app(
    results: Path, baseline: Path | None, data: Path | None, title: str
) -> tuple[str, str] | None:
    """The viewer's item table and item view, inlined: the policy that lets only its script
    run (head), then its style, data and script (body). ``None`` after saying why not."""
    from composo.cli._view_data import ViewError, load_run, page_data
    from composo.cli._view_page import data_element, inline_assets

    try:
        runs = [load_run(p, data) for p in ([baseline] if baseline else []) + [results]]
    except ViewError as exc:
        print(f"composo report: error: --items: {exc}", file=sys.stderr)
        return None
    model = page_data(runs, mode="report", title=title, conversations=True, cap=_ITEM_TEXT_CAP)
    css, script, policy = inline_assets()
    head = f'<meta http-equiv="Content-Security-Policy" content="{_esc(policy)}">'
    body = (
        f'<style>{css}</style><div id="composo-app"></div>{data_element(model)}'
        f"<script>{script}</script>"
    )
    return head, body


def _set_aside(problems: list[RowProblem], total: int) -> str:
    """The rows of the results file that are not results (a score of NaN, 1.5, a number for an
    explanation...): counted nowhere else, so listed here."""
    if not total:
        return ""
    rows = "".join(
        f'<tr><td class="id">line {p.line}</td><td class="id">{_esc(p.id or "")}</td>'
        f"<td>{_esc(_label(p.criterion) if p.criterion else '')}</td>"
        f'<td class="err">{_esc(p.problem)}</td></tr>'
        for p in problems[:_PROBLEMS_SHOWN]
    )
    more = (
        f'<p class="sub">… and {total - _PROBLEMS_SHOWN} more</p>'
        if total > _PROBLEMS_SHOWN
        else ""
    )
    return (
        f'<section class="card" id="set-aside"><h2>Rows set aside</h2><p class="sub err">{total} '
        "row(s) of the results file are not results and are counted nowhere on this page; fix "
        "or remove them (the command exited with status 4).</p><table><tr><th>line</th><th>id"
        f"</th><th>criterion</th><th>problem</th></tr>{rows}</table>{more}</section>"
    )


# -- the run's header and the breakdown by tag ------------------------------------------------


def _run_header(info: RunInfo | None, criteria: dict[str, _Criterion]) -> str:
    """Who judged, with which model core, against which criteria: one box at the top."""
    from composo.cli._summary import RunInfo, Summary, judge_text, sources_text

    info = info or RunInfo()
    dev = "heuristic" in (info.judge, *info.judges) or (info.judge is None and info.local)
    if info.judge is None and not info.local and not info.criteria:
        judge = "not recorded (results written by an older version, or moved without their "
        judge += ".run.json)"
    else:
        judge = (
            Summary({}, info).judge_description()
            if info.judges
            else judge_text(info.judge, info.local)
        )
    names = "".join(
        f"<li><b>{_esc(_label(c))}</b>" + (f" — {_esc(c)}" if _label(c) != c else "") + "</li>"
        for c in criteria
    )
    cells = [
        ("judge", _esc(judge)),
        ("model core", _esc(info.model_core or "the server's default")),
        *([("scores", _esc(sources_text(info.sources)))] if info.sources else []),
        ("criteria", f'{len(criteria)}<ul style="margin:2px 0 0 0;padding-left:18px">{names}</ul>'),
    ]
    body = "".join(f"<tr><td>{k}</td><td>{v}</td></tr>" for k, v in cells)
    return f'<section class="run{" dev" if dev else ""}"><table>{body}</table></section>'


def _by_tag(criteria: dict[str, _Criterion], dataset: _Dataset, rows: Any) -> str:
    """Mean score per tag value and criterion (the items scored under each), for tags with a
    handful of values — e.g. the bundled data's ``expected``: good against flawed."""
    import statistics

    # tag key -> value -> criterion -> scores
    groups: dict[str, dict[str, dict[str, list[float]]]] = {}
    for row in rows:
        score = row.get("score")
        if row.get("error") is not None or not isinstance(score, (int, float)):
            continue
        for key, value in dataset.tags.get(row["index"], {}).items():
            per = groups.setdefault(key, {}).setdefault(value, {})
            per.setdefault(row["criterion"], []).append(float(score))
    tables = []
    for key in sorted(groups):
        values = groups[key]
        if len(values) > _TAG_VALUES or len(values) < 2:
            continue
        heads = "".join(f"<th>{_esc(_label(c))}</th>" for c in criteria)
        body = []
        for value in sorted(values):
            cells = []
            for c in criteria:
                got = values[value].get(c)
                cells.append(
                    f'<td>{_pill(statistics.fmean(got))} <span class="sub">({len(got)})</span></td>'
                    if got
                    else f"<td>{_pill(None, 'no data')}</td>"
                )
            body.append(f"<tr><td><b>{_esc(value)}</b></td>{''.join(cells)}</tr>")
        tables.append(
            f"<h3>{_esc(key)}</h3><table><tr><th>value</th>{heads}</tr>{''.join(body)}</table>"
        )
    if not tables:
        return ""
    return (
        '<section class="card"><h2>By tag</h2><p class="sub">mean score of the scored items '
        "with each tag value (their number in brackets)</p>" + "".join(tables) + "</section>"
    )
