"""``composo criteria``: the ready-made criteria, by group, with the names ``-c`` accepts."""

from __future__ import annotations

import argparse
import os
import sys
import textwrap
from collections.abc import Sequence

from composo import criteria
from composo.cli import UsageError
from composo.cli._names import GROUPS, library


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("group", nargs="?", metavar="GROUP", help=f"one of {', '.join(GROUPS)}")


def run(args: argparse.Namespace) -> int:
    from composo._core.wire import is_binary

    groups: Sequence[str] = GROUPS
    if args.group:
        if args.group.upper() not in GROUPS:
            raise UsageError(f"no group {args.group!r}; use one of {', '.join(GROUPS)}")
        groups = (args.group.upper(),)
    named = {text: name for name, text in library().items()}
    lines: list[str] = []
    for group in groups:
        lines.append(f"{group}  (-c {group} selects them all)")
        for text in getattr(criteria, group):
            kind = "0 or 1" if is_binary(text) else "0 to 1"
            lines.append(f"  {named[text]}  [{kind}]")
            lines.extend(
                textwrap.wrap(text, width=88, initial_indent="      ", subsequent_indent="      ")
            )
        lines.append("")
    lines.append("Use a name with -c, e.g.: composo evaluate data.jsonl -c rag_faithfulness")
    try:
        print("\n".join(lines), flush=True)
    except BrokenPipeError:  # `composo criteria | head`: the reader left, which is fine
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0
