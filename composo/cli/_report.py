"""``composo report``: a results file as one HTML page that works offline, from ``file://``: the
page ``composo view`` serves (:mod:`composo.cli._page`), written with its data, every
conversation and its script inlined. The run's judge and figures per criterion, the lowest
scores, errors, rows set aside and means by tag, then every item in a table to search, sort and
filter, each item's conversation and explanations. With ``--baseline`` an earlier run comes first
and what changed between them is shown, as ``composo compare`` measures it."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

__all__ = ["add_arguments", "run"]

_ITEM_TEXT_CAP = 4000  # a message or explanation kept in the page up to this many characters


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.epilog = (
        "exit status: 0 written, 2 bad command line or results that cannot be read, 4 a results "
        "file had rows that are not results (listed on the page and on stderr)"
    )
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
    parser.add_argument(
        "--items",
        action="store_true",
        help="accepted for older scripts: the item table is always there",
    )


def run(args: argparse.Namespace) -> int:
    from composo.cli._page import ViewError, load_run, page_data, page_html
    from composo.cli._results import EXIT_BAD_ROWS

    def usage(message: str) -> int:
        print(f"composo report: error: {message}", file=sys.stderr)
        return 2

    if args.lowest < 0:
        return usage("--lowest must be 0 or more")
    if args.data is not None and not args.data.is_file():
        return usage(f"--data: no such file: {args.data}")
    runs = []
    for path, name in ((args.baseline, "--baseline: "), (args.results, "")):
        if path is None:
            continue
        try:
            runs.append(load_run(path, args.data))
        except ViewError as exc:
            return usage(f"{name}{exc}")
    for each in runs:
        each.checked.report("report")
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
        return usage(f"--baseline: {refused[0]}")
    args.output.write_text(page_html(data), encoding="utf-8")
    print(f"wrote {args.output}", file=sys.stderr)
    return EXIT_BAD_ROWS if any(r.checked.bad for r in runs) else 0
