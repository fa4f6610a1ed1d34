"""The ``composo`` command line. Each subcommand lives in its own module and is imported only when
run, so ``composo --help`` stays fast and optional dependencies load only where needed."""

from __future__ import annotations

import argparse
import importlib
import re
import sys
from collections.abc import Sequence

__all__ = ["UsageError", "main"]

# subcommand -> (module, one-line help). Each module defines ``add_arguments(parser)`` and
# ``run(args) -> int``.
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "evaluate": (
        "composo.cli._evaluate",
        "evaluate a JSONL, CSV or Parquet dataset against criteria",
    ),
    "report": ("composo.cli._report", "turn evaluation results into a self-contained HTML report"),
    "compare": ("composo.cli._compare", "compare two runs' results, criterion by criterion"),
    "agreement": ("composo.cli._agreement", "how well the judge agrees with people's labels"),
    "view": ("composo.cli._view", "browse, compare and review results in a local web page"),
    "criteria": ("composo.cli._criteria", "list the ready-made criteria"),
    "serve": ("composo.cli._serve", "run a local Composo-compatible evaluation server"),
    "cache": ("composo.cli._cache", "show or clear the result cache"),
    "evaluate-traces": ("composo.cli._evaluate_traces", "evaluate the traces of an OTLP export"),
    "history": ("composo.cli._history", "write past evaluations (by tag, criterion) to a file"),
    "usage": ("composo.cli._usage", "show this month's usage and the rate limit"),
}

# The exit statuses, the same for every command (docs/cli.md, "Exit statuses", says which
# command gives which); every command's --help ends with EPILOG.
EXIT_FAILED, EXIT_USAGE, EXIT_GATE, EXIT_BAD_ROWS, EXIT_SERVER = 1, 2, 3, 4, 5
EXIT_INTERRUPTED = 130
EPILOG = (
    "exit status: 0 done, 1 items failed, 2 bad command line or input, 3 a quality gate failed, "
    "4 rows set aside, 5 the server refused the key or could not be reached, 130 interrupted "
    "(docs/cli.md, 'Exit statuses')"
)


class UsageError(Exception):
    """A command line that cannot run: ``main`` says why and exits 2, before any request."""


def build_parser(
    command: str | None = None,
) -> tuple[argparse.ArgumentParser, argparse.ArgumentParser | None]:
    """The parser and ``command``'s own: only that command's module is imported."""
    from composo._version import __version__

    parser = argparse.ArgumentParser(prog="composo", description="Composo evaluation tools.")
    parser.add_argument("--version", action="version", version=f"composo {__version__}")
    subs = parser.add_subparsers(dest="command", metavar="COMMAND")
    own = None
    for name, (module, help_text) in SUBCOMMANDS.items():
        sub = subs.add_parser(name, help=help_text, description=help_text, epilog=EPILOG)
        if name == command:
            importlib.import_module(module).add_arguments(sub)
            own = sub
    return parser, own


_OPTION = re.compile(r"(?<![\w-])(--?[A-Za-z0-9][\w-]*)")
_NUMBER = re.compile(r"-\d|-\.\d")


def _is_known(token: str, known: list[str]) -> bool:
    """Whether argparse would take ``token`` as one of ``known`` (a long flag may be cut short
    to any unambiguous start, a short one may carry its value: ``-c3``)."""
    if token.startswith("--"):
        return token in known or any(k.startswith(token) for k in known if k.startswith("--"))
    return token[:2] in known


def _unknown_flag(parser: argparse.ArgumentParser, tokens: list[str], who: str) -> str | None:
    """Usage and a one-line error for the first flag ``parser`` does not have, with the closest
    of its own. Checked before parsing, so that a mistyped flag is named even when it leaves a
    required one missing."""
    import difflib

    known = sorted(set(_OPTION.findall(parser.format_usage())) | {"-h", "--help"})
    for token in tokens:
        if token == "--":
            return None
        if not token.startswith("-") or token == "-" or " " in token or _NUMBER.match(token):
            continue
        flag = token.split("=", 1)[0]
        if _is_known(flag, known):
            continue
        close = difflib.get_close_matches(flag, known, n=1, cutoff=0.6)
        hint = f"; did you mean {close[0]!r}?" if close else f" (see {who} --help)"
        return f"{parser.format_usage()}{who}: error: no flag {flag!r}{hint}"
    return None


def _unknown_command(argv: Sequence[str]) -> str | None:
    """A one-line error, with the closest command, for a first word that is no command."""
    import difflib

    first = next((a for a in argv if not a.startswith("-")), None)
    if first is None or first in SUBCOMMANDS or argv[0] != first:
        return None
    close = difflib.get_close_matches(first, list(SUBCOMMANDS), n=1, cutoff=0.6)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return f"composo: error: no command {first!r}{hint} (commands: {', '.join(SUBCOMMANDS)})"


def main(argv: Sequence[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    unknown = _unknown_command(words)
    if unknown is not None:
        print(unknown, file=sys.stderr)
        return EXIT_USAGE
    command = words[0] if words and words[0] in SUBCOMMANDS else None
    parser, own = build_parser(command)
    # a mistyped flag is answered by the command it was given to
    if own is not None:
        typo = _unknown_flag(own, words[1:], f"composo {command}")
    else:
        typo = _unknown_flag(parser, words, "composo")
    if typo is not None:
        print(typo, file=sys.stderr)
        return EXIT_USAGE
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        code: int = importlib.import_module(SUBCOMMANDS[args.command][0]).run(args)
    except UsageError as exc:
        print(f"composo {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    return code
