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
# command gives which); every command's --help ends with this.
EPILOG = (
    "exit status: 0 done, 1 items failed, 2 bad command line or input, 3 a quality gate failed, "
    "4 rows set aside, 5 the server refused the key or could not be reached, 130 interrupted "
    "(docs/cli.md, 'Exit statuses')"
)


class UsageError(Exception):
    """A command line that cannot run: ``main`` prints ``composo COMMAND: error: MESSAGE`` and
    exits 2, before any request."""


class _Parser(argparse.ArgumentParser):
    """The command line's parser; ``commands`` holds each subcommand's own parser, so that a
    mistyped flag is answered by the subcommand it was given to."""

    commands: dict[str, argparse.ArgumentParser]


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser; only ``command``'s module is imported to add its flags (the others are
    listed by name and help, so ``composo evaluate`` loads one subcommand, not eleven)."""
    parser = _Parser(prog="composo", description="Composo evaluation tools.")
    parser.commands = {}
    parser.add_argument("--version", action="version", version=_version())
    subs = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module, help_text) in SUBCOMMANDS.items():
        sub = subs.add_parser(name, help=help_text, description=help_text, epilog=EPILOG)
        if name == command:
            importlib.import_module(module).add_arguments(sub)
            parser.commands[name] = sub
    return parser


_OPTION = re.compile(r"(?<![\w-])(--?[A-Za-z0-9][\w-]*)")
_NUMBER = re.compile(r"-\d|-\.\d")


def _flags(parser: argparse.ArgumentParser) -> list[str]:
    """The flags a parser's usage line lists (every flag its --help shows)."""
    return sorted(set(_OPTION.findall(parser.format_usage())) | {"-h", "--help"})


def _is_known(token: str, known: list[str]) -> bool:
    """Whether argparse would take ``token`` as one of ``known`` (a long flag may be cut short
    to any unambiguous start, a short one may carry its value: ``-c3``)."""
    if token.startswith("--"):
        return token in known or any(k.startswith(token) for k in known if k.startswith("--"))
    return token[:2] in known


def _unknown_flag(parser: argparse.ArgumentParser, argv: list[str]) -> str | None:
    """Usage and a one-line error for the first flag the command does not have, with the
    closest of its own flags; ``None`` when every flag is the command's. Checked before parsing,
    so that a mistyped flag is named even when it leaves a required one missing."""
    import difflib

    commands = parser.commands if isinstance(parser, _Parser) else {}
    command = argv[0] if argv and argv[0] in commands else None
    sub = commands[command] if command is not None else parser
    known = _flags(sub)
    tokens = argv[1:] if command is not None else argv
    for token in tokens:
        if token == "--":
            return None
        if not token.startswith("-") or token == "-" or " " in token or _NUMBER.match(token):
            continue
        flag = token.split("=", 1)[0]
        if _is_known(flag, known):
            continue
        who = f"composo {command}" if command else "composo"
        close = difflib.get_close_matches(flag, known, n=1, cutoff=0.6)
        hint = f"; did you mean {close[0]!r}?" if close else f" (see {who} --help)"
        return f"{sub.format_usage()}{who}: error: no flag {flag!r}{hint}"
    return None


def _version() -> str:
    from composo._version import __version__

    return f"composo {__version__}"


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
        return 2
    parser = build_parser(words[0] if words and words[0] in SUBCOMMANDS else None)
    # a mistyped flag is answered by the command it was given to
    typo = _unknown_flag(parser, words)
    if typo is not None:
        print(typo, file=sys.stderr)
        return 2
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    try:
        code: int = importlib.import_module(SUBCOMMANDS[args.command][0]).run(args)
    except UsageError as exc:
        print(f"composo {args.command}: error: {exc}", file=sys.stderr)
        return 2
    return code
