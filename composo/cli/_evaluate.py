"""``composo evaluate``: score a JSONL dataset against criteria, writing one row per item and
criterion as results arrive; re-running with the same ``-o`` resumes where the last run stopped."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import importlib.util
import os
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from composo import Composo
    from composo._core.plan import Progress
    from composo.cli._data import DataRun
    from composo.cli._results import CriterionStats, Resume, RowWriter, RunInfo
    from composo.types import BatchResult, EvaluateOptions

__all__ = ["add_arguments", "run"]

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
_SHOWN_ERRORS = 20


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "input",
        metavar="INPUT",
        help="JSONL file, one conversation per line ('messages', or 'input' and 'result'; "
        "optional 'id', 'system', 'tools', 'tags'), a CSV or Parquet file (columns mapped by "
        "name, see --question-column...), or - for stdin",
    )
    parser.add_argument(
        "-c",
        "--criterion",
        dest="criteria",
        action="append",
        required=True,
        metavar="CRITERION",
        help="a criterion ('Reward ...', 'Penalize ...', 'Passes if ...', 'Fails if ...'), a name "
        "from `composo criteria`, or a group (RAG, TOOL_USE, AGENT, BINARY); repeatable",
    )
    parser.add_argument(
        "-o",
        "--output",
        type=Path,
        metavar="OUT.jsonl",
        help="results file (default: stdout). Re-running with the same INPUT and file resumes: "
        "rows are matched by line number and criterion, scored pairs are skipped, failed ones "
        "retried. A name ending .parquet also writes Parquet at the end",
    )
    parser.add_argument(
        "--concurrency",
        type=_positive_int,
        default=5,
        metavar="N",
        help="requests in flight at once (default 5, what the platform advises)",
    )
    parser.add_argument(
        "--tag",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a tag sent with every evaluation (repeatable; an item's own tags win)",
    )
    parser.add_argument(
        "--model-core",
        metavar="CORE",
        help="the evaluation model core, e.g. align-20251111 (default: the platform's)",
    )
    parser.add_argument("--base-url", metavar="URL", help="API base URL (or COMPOSO_BASE_URL)")
    parser.add_argument("--api-key", metavar="KEY", help="API key (or COMPOSO_API_KEY)")
    parser.add_argument(
        "--local",
        action="store_true",
        help="start a local server with the offline heuristic judge (no account needed; "
        "a development stand-in, not a quality judge)",
    )
    # -- tables and the result cache (composo.cli._data) --
    from composo.cli._data import add_arguments as add_data_arguments

    add_data_arguments(parser)
    # -- end tables and the result cache --
    # -- quality gates and CI files (composo.cli._gates) --
    from composo.cli._gates import add_arguments as add_gate_arguments

    add_gate_arguments(parser)
    # -- end quality gates --


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def parse_tags(pairs: Iterable[str]) -> dict[str, str]:
    """``--tag KEY=VALUE`` flags as a dict; ``ValueError`` names the one that is not a pair."""
    tags: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ValueError(f"--tag: expected KEY=VALUE, got {pair!r}")
        tags[key] = value
    return tags


def _usage(message: str) -> int:
    print(f"composo evaluate: error: {message}", file=sys.stderr)
    return EXIT_USAGE


def run(args: argparse.Namespace) -> int:
    from composo.cli._criteria import resolve
    from composo.cli._results import (
        RowWriter,
        iter_rows,
        prepare_resume,
        print_summary,
        summarize,
    )
    from composo.errors import ComposoValidationError

    try:
        criteria = resolve(args.criteria)
    except ValueError as exc:
        return _usage(str(exc))
    try:
        tags = parse_tags(args.tag)
    except ValueError as exc:
        return _usage(str(exc))
    if args.local and (args.base_url or args.api_key):
        return _usage("--local runs its own server; drop --base-url and --api-key")
    source: Path | None = None
    if args.input != "-":
        source = Path(args.input)
        if not source.is_file():
            return _usage(f"INPUT: no such file: {args.input}")
    if args.output is not None and source is not None and args.output.resolve() == source.resolve():
        return _usage("-o: the results file cannot be the input file")
    # -- tables and the result cache: the input's reader, a Parquet -o, the cache --
    from composo.cli import _data

    try:
        data = _data.DataRun(args, source)
    except _data.DataUsageError as exc:
        return _usage(str(exc))
    # -- end tables and the result cache --
    if args.local:
        try:
            import fastapi  # noqa: F401
            import uvicorn  # noqa: F401
        except ImportError:
            return _usage("--local needs the local server's packages: pip install 'composo[cli]'")
    elif not (args.api_key or os.environ.get("COMPOSO_API_KEY", "").strip()):
        return _usage(
            "no API key: pass --api-key KEY or set COMPOSO_API_KEY (or use --local to try it "
            "offline against a local server)"
        )

    try:
        resume = prepare_resume(args.output, set(criteria)) if args.output is not None else None
        writer = RowWriter(args.output, None if args.output is not None else sys.stdout.buffer)
    except OSError as exc:
        return _usage(f"-o: cannot write {args.output}: {exc.strerror or exc}")
    if resume is not None and (resume.kept or resume.dropped_errors or resume.repaired):
        retry = (
            f", {resume.dropped_errors} failed pair(s) to retry" if resume.dropped_errors else ""
        )
        repaired = ", damaged or duplicate lines removed" if resume.repaired else ""
        print(
            f"resuming {args.output}: {resume.kept} pair(s) already scored{retry}{repaired}",
            file=sys.stderr,
        )
    tally: dict[str, CriterionStats] | None = {} if args.output is None else None
    # -- the run's header: judge, model core, criteria (composo.cli._results.RunInfo) --
    from composo.cli._results import RunInfo

    info = RunInfo(
        local=args.local,
        model_core=args.model_core,
        criteria=criteria,
        input=None if source is None else str(source.resolve()),
    )
    # -- end run header --
    interrupted = False
    run_state: _Run | None = None
    try:
        with contextlib.ExitStack() as stack:
            base_url, api_key = args.base_url, args.api_key
            if args.local:
                from composo.server import LocalServer

                srv = stack.enter_context(LocalServer(judge="heuristic", latency=0.0))
                base_url, api_key = srv.base_url, srv.api_key
            client = stack.enter_context(
                _client(api_key, base_url, args.concurrency, info, data.transport(args.concurrency))
            )
            options: EvaluateOptions = {"model_core": args.model_core, "tags": tags or None}
            run_state = _Run(criteria, resume, writer, tally, options)
            run_state.data = data
            run_state.main(client, source, args.concurrency)
    except ComposoValidationError as exc:  # the client refused its settings
        return _usage(str(exc))
    except KeyboardInterrupt:
        interrupted = True
    except BrokenPipeError:  # the reader of stdout went away: nowhere left to write results
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        print("stopped: the output was closed", file=sys.stderr)
        return EXIT_FAILED
    finally:
        writer.close()
        data.close()

    stats = summarize(iter_rows(args.output)) if args.output is not None else (tally or {})
    if args.output is not None:
        info.save(args.output)
    print_summary(stats, criteria, info, str(args.output) if args.output else "stdout")
    data.finish(run_state.fatal if run_state is not None else None, interrupted)  # cache, Parquet
    if interrupted:
        print("interrupted; run the same command again to resume", file=sys.stderr)
        return EXIT_INTERRUPTED
    if run_state is not None and run_state.fatal is not None:
        print(f"stopped: {run_state.fatal}", file=sys.stderr)
        return EXIT_FAILED
    # -- quality gates and CI files (composo.cli._gates): exit 3 when a gate fails --
    from composo.cli._gates import finish

    gate_status = finish(args, stats, criteria)
    # -- end quality gates --
    return EXIT_FAILED if any(s.errors for s in stats.values()) else gate_status


@contextlib.contextmanager
def _client(
    api_key: str | None,
    base_url: str | None,
    concurrency: int,
    info: RunInfo | None = None,
    transport: Any = None,
) -> Iterator[Composo]:
    """A client allowed ``concurrency`` requests at once, with as many kept-alive connections
    (fewer would close and reopen connections all run long), each read bounded by the call's
    timeout; ``info`` learns the judge's name from the server's answers; ``transport``: the
    caching one."""
    import httpx

    from composo import Composo
    from composo._core import deadline

    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    if transport is None:
        transport = httpx.HTTPTransport(limits=limits)
        deadline.install(transport)  # every read waits at most what is left of the call's time
    hooks = {"response": [info.observe]} if info is not None else {}
    with (
        httpx.Client(limits=limits, transport=transport, event_hooks=hooks) as http,
        Composo(
            api_key=api_key,
            base_url=base_url,
            max_concurrent_requests=concurrency,
            http_client=http,
        ) as client,
    ):
        yield client


class _Pace:
    """The client's pace, for the progress line (a terminal) or a note on stderr (a log): says
    when the server throttles the run and how fast it goes then."""

    def __init__(self, client: Composo) -> None:
        self._throttle = client._throttle
        self._told = 0
        self._told_at = 0.0

    def status(self) -> str | None:
        return self._throttle.status()

    def note(self) -> None:
        """One line on stderr per throttling episode, at most every ten seconds."""
        import time

        count = self._throttle.throttled
        now = time.monotonic()
        if count > self._told and now - self._told_at >= 10.0:
            self._told, self._told_at = count, now
            print(
                f"{self.status() or 'throttled'} (the server answered 429; slowing down, "
                "nothing is lost)",
                file=sys.stderr,
            )


class _Run:
    """One run: feeds the dataset's lines to the batch runner and writes each result."""

    def __init__(
        self,
        criteria: list[str],
        resume: Resume | None,
        writer: RowWriter,
        tally: dict[str, CriterionStats] | None,
        options: EvaluateOptions | None = None,
    ) -> None:
        self.criteria = criteria
        self.options: EvaluateOptions = options or {}
        self.resume = resume
        self.writer = writer
        self.tally = tally
        self.fatal: str | None = None
        self.shown = 0
        self.warned: set[int] = set()
        self.unreachable = 0  # consecutive results that never reached the server
        self.give_up_after = 20
        self.bar: Progress | None = None
        self.lines: dict[int, tuple[int, int]] = {}
        self.data: DataRun | None = None

    def main(self, client: Composo, source: Path | None, concurrency: int) -> None:
        """Stream the lines through the client's public batch API and write each result."""
        self.give_up_after = 2 * concurrency + 10
        bar = self._progress(source)
        pace = _Pace(client)
        if bar is not None:
            bar.status = pace.status
        # Item position in the stream -> (line index, results still due): a line is remembered
        # only while its requests are pending.
        self.lines = {}
        assert self.data is not None
        with self.data.records as lines:
            if bar is not None:
                bar.start()
            try:
                stream = client.evaluate_many_iter(
                    self.items(lines),
                    self.criteria,
                    concurrency=concurrency,
                    progress=(lambda done, total: bar.advance()) if bar is not None else False,
                    **self.options,
                )
                for result in stream:
                    if bar is None:
                        pace.note()
                    line, left = self.lines.pop(result.index)
                    if left > 1:
                        self.lines[result.index] = (line, left - 1)
                    self.record(dataclasses.replace(result, index=line))
            finally:
                if bar is not None:
                    bar.close()

    def _progress(self, source: Path | None) -> Progress | None:
        from composo._core.plan import Progress

        if not sys.stderr.isatty() or importlib.util.find_spec("rich") is None:
            return None  # no terminal, or no rich (the `cli` extra): no bar
        total = None
        if self.data is not None and self.data.records.format != "jsonl":  # tables
            rows = self.data.records.rows
            total = None if rows is None else rows * len(self.criteria)
        elif source is not None:
            total = 0
            with source.open("rb") as f:
                for index, line in enumerate(f):
                    if line.strip():
                        total += len(self._remaining(index))
        self.bar = Progress(True, total)
        return self.bar

    def _remaining(self, index: int) -> list[str]:
        return self.resume.remaining(index, self.criteria) if self.resume else self.criteria

    def items(self, records: Iterable[tuple[int, Any]]) -> Iterator[dict[str, Any]]:
        """One item per record (a line, a table row) that still has pairs to do, carrying the
        ``criteria`` it still needs; a record that cannot be used gets its error rows here."""
        from composo._core.readers import BadRow, UnreadableInput

        position = 0
        stream = iter(records)
        while True:
            if self.fatal is not None:
                return
            try:
                index, item = next(stream)
            except StopIteration:
                return
            except UnreadableInput as exc:  # what was scored so far is already written
                self.fatal = f"{exc}. Run the same command again to resume"
                return
            wanted = self._remaining(index)
            if not wanted:
                continue
            if isinstance(item, BadRow):
                self._bad(index, wanted, item.message)
                continue
            self.lines[position] = (index, len(wanted))
            position += 1
            yield {**item, "criteria": wanted}

    def _bad(self, index: int, wanted: list[str], message: str) -> None:
        from composo.errors import ComposoValidationError
        from composo.types import BatchResult

        self._warn(index, message)
        error = ComposoValidationError(message)
        for criterion in wanted:
            self.record(BatchResult(index, criterion, None, None, error))
            if self.bar is not None:
                self.bar.advance()

    def record(self, result: BatchResult) -> None:
        from composo.cli._results import CriterionStats
        from composo.errors import (
            APIConnectionError,
            AuthenticationError,
            NotFoundError,
            PermissionDeniedError,
        )

        row = result.row()
        self.writer.write(row)
        if self.tally is not None:
            self.tally.setdefault(result.criterion, CriterionStats()).add(row)
        error = result.error
        self.unreachable = self.unreachable + 1 if isinstance(error, APIConnectionError) else 0
        if error is None:
            return
        # Failures every other request would share: stop reading the dataset (a re-run resumes).
        if self.fatal is None:
            if isinstance(error, (AuthenticationError, PermissionDeniedError, NotFoundError)):
                self.fatal = f"{row['error']} (check --api-key and --base-url)"
            elif self.unreachable >= self.give_up_after:
                self.fatal = (
                    f"{self.unreachable} requests in a row could not reach the server; last: "
                    f"{row['error']}. Run the same command again to resume"
                )
        if self.fatal is not None:
            return
        self._warn(result.index, f"line {result.index + 1}: {row['error']}")

    def _warn(self, index: int, message: str) -> None:
        """Say what went wrong, once per line, and only for the first few lines."""
        if self.shown > _SHOWN_ERRORS or index in self.warned:
            return
        self.shown += 1
        if self.shown > _SHOWN_ERRORS:
            self.warned.clear()
            print("(more errors: see the rows with an error in the output)", file=sys.stderr)
            return
        self.warned.add(index)
        print(message, file=sys.stderr)
