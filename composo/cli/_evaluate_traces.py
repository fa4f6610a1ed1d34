"""``composo evaluate-traces``: score the traces of an OTLP/JSON export (an OpenTelemetry
Collector file export, or one JSON document) against criteria, one row per trace and criterion.

Spans are grouped by trace id and converted by ``composo.tracing``; a trace id that forms no
trace (no model call, too many spans, damaged lines) gets an error row per criterion saying why.
The results file, resume, summary, gates and CI files are those of ``composo evaluate``: rows
carry the trace's position in the export as ``index`` and its trace id as ``id``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from composo.cli._results import CriterionStats, Resume, RowWriter
    from composo.tracing._otlp import OtlpReader
    from composo.types import BatchResult, EvaluateOptions

__all__ = ["add_arguments", "run"]

EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 1, 2, 130
_SHOWN = 20


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from composo.cli._evaluate import _positive_int
    from composo.cli._gates import add_arguments as add_gate_arguments

    parser.add_argument(
        "input",
        metavar="FILE",
        help="OTLP/JSON trace export: one ExportTraceServiceRequest per line (the OpenTelemetry "
        "Collector's file exporter) or a single JSON document",
    )
    parser.add_argument(
        "-c",
        "--criterion",
        dest="criteria",
        action="append",
        required=True,
        metavar="CRITERION",
        help="a criterion, a name from `composo criteria`, or a group; repeatable",
    )
    parser.add_argument(
        "-o",
        "--output",
        type=Path,
        metavar="OUT.jsonl",
        help="results file (default: stdout); re-running with the same FILE resumes",
    )
    parser.add_argument(
        "--concurrency", type=_positive_int, default=5, metavar="N", help="requests in flight"
    )
    parser.add_argument(
        "--max-spans",
        type=_positive_int,
        default=None,
        metavar="N",
        help="spans one trace may have before it is reported as too large (default 10000)",
    )
    parser.add_argument("--tag", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--model-core", metavar="CORE", help="the evaluation model core")
    parser.add_argument("--base-url", metavar="URL", help="API base URL (or COMPOSO_BASE_URL)")
    parser.add_argument("--api-key", metavar="KEY", help="API key (or COMPOSO_API_KEY)")
    parser.add_argument(
        "--local",
        action="store_true",
        help="start a local server with the offline heuristic judge (a development stand-in)",
    )
    add_gate_arguments(parser)


def _usage(message: str) -> int:
    print(f"composo evaluate-traces: error: {message}", file=sys.stderr)
    return EXIT_USAGE


def run(args: argparse.Namespace) -> int:
    from composo.cli._criteria import resolve
    from composo.cli._evaluate import _client, parse_tags
    from composo.cli._gates import finish
    from composo.cli._results import (
        RowWriter,
        RunInfo,
        iter_rows,
        prepare_resume,
        print_summary,
        summarize,
    )
    from composo.errors import ComposoValidationError
    from composo.tracing._otlp import MAX_SPANS_PER_TRACE, OtlpReader

    try:
        criteria = resolve(args.criteria)
    except ValueError as exc:
        return _usage(str(exc))
    try:
        tags = parse_tags(args.tag)
    except ValueError as exc:
        return _usage(str(exc))
    source = Path(args.input)
    if not source.is_file():
        return _usage(f"FILE: no such file: {args.input}")
    if args.output is not None and args.output.resolve() == source.resolve():
        return _usage("-o: the results file cannot be the input file")
    if args.local and (args.base_url or args.api_key):
        return _usage("--local runs its own server; drop --base-url and --api-key")
    if not args.local and not (args.api_key or os.environ.get("COMPOSO_API_KEY", "").strip()):
        return _usage("no API key: pass --api-key KEY or set COMPOSO_API_KEY (or use --local)")
    try:
        resume = prepare_resume(args.output, set(criteria)) if args.output is not None else None
        writer = RowWriter(args.output, None if args.output is not None else sys.stdout.buffer)
    except OSError as exc:
        return _usage(f"-o: cannot write {args.output}: {exc.strerror or exc}")
    if resume is not None and resume.kept:
        print(f"resuming {args.output}: {resume.kept} pair(s) already scored", file=sys.stderr)
    reader = OtlpReader(source, max_spans=args.max_spans or MAX_SPANS_PER_TRACE)
    info = RunInfo(
        local=args.local, model_core=args.model_core, criteria=criteria, input=str(source.resolve())
    )
    state = _Run(criteria, resume, writer, None if args.output is not None else {})
    interrupted = False
    try:
        with contextlib.ExitStack() as stack:
            base_url, api_key = args.base_url, args.api_key
            if args.local:
                from composo.server import LocalServer

                srv = stack.enter_context(LocalServer(judge="heuristic", latency=0.0))
                base_url, api_key = srv.base_url, srv.api_key
            client = stack.enter_context(_client(api_key, base_url, args.concurrency, info))
            options: EvaluateOptions = {"model_core": args.model_core, "tags": tags or None}
            stream = client.evaluate_many_iter(
                state.items(reader), criteria, concurrency=args.concurrency, **options
            )
            for result in stream:
                state.record(result, state.position(result.index))
    except ComposoValidationError as exc:
        return _usage(str(exc))
    except KeyboardInterrupt:
        interrupted = True
    finally:
        writer.close()
    for problem in reader.problems:
        print(f"{source.name}: {problem}", file=sys.stderr)
    stats = summarize(iter_rows(args.output)) if args.output is not None else (state.tally or {})
    if args.output is not None:
        info.save(args.output)
    print_summary(stats, criteria, info, str(args.output) if args.output else "stdout")
    print(
        f"{state.traces} trace(s) read, {state.unusable} could not be evaluated",
        file=sys.stderr,
    )
    if interrupted:
        print("interrupted; run the same command again to resume", file=sys.stderr)
        return EXIT_INTERRUPTED
    gate_status = finish(args, stats, criteria)
    failed = any(s.errors for s in stats.values()) or bool(reader.problems)
    return EXIT_FAILED if failed else gate_status


class _Run:
    """Turns the export's traces into batch items (error rows for those that form none)."""

    def __init__(
        self,
        criteria: list[str],
        resume: Resume | None,
        writer: RowWriter,
        tally: dict[str, CriterionStats] | None,
    ) -> None:
        self.criteria = criteria
        self.resume = resume
        self.writer = writer
        self.tally = tally
        self.lock = threading.Lock()
        # position in the item stream -> (trace index, results still due), while pending
        self.positions: dict[int, tuple[int, int]] = {}
        self.traces = 0
        self.unusable = 0
        self.shown = 0

    def items(self, reader: OtlpReader) -> Iterator[dict[str, Any]]:
        from composo.errors import ComposoValidationError
        from composo.types import BatchResult

        position = 0
        for item in reader:
            self.traces += 1
            converted = item.converted
            wanted = (
                self.resume.remaining(item.index, self.criteria) if self.resume else self.criteria
            )
            if not wanted:
                continue
            for note in converted.notes:
                self._say(f"trace {converted.trace_id}: {note}")
            if converted.trace is None:
                self.unusable += 1
                message = converted.error or f"trace {converted.trace_id}: no trace"
                self._say(message)
                error = ComposoValidationError(message)
                for criterion in wanted:
                    result = BatchResult(item.index, criterion, converted.trace_id, None, error)
                    self.record(result, item.index)
                continue
            self.positions[position] = (item.index, len(wanted))
            position += 1
            yield {"trace": converted.trace, "id": converted.trace_id, "criteria": wanted}

    def position(self, stream_index: int) -> int:
        """The trace index of a result, forgetting the item once all its results came."""
        index, left = self.positions.pop(stream_index)
        if left > 1:
            self.positions[stream_index] = (index, left - 1)
        return index

    def record(self, result: BatchResult, index: int) -> None:
        import dataclasses

        from composo.cli._results import CriterionStats

        row = dataclasses.replace(result, index=index).row()
        with self.lock:
            self.writer.write(row)
            if self.tally is not None:
                self.tally.setdefault(result.criterion, CriterionStats()).add(row)
        if row["error"] is not None and not row["error"].startswith("ComposoValidationError"):
            self._say(f"trace {row['id']}: {row['error']}")

    def _say(self, message: str) -> None:
        with self.lock:
            self.shown += 1
            if self.shown <= _SHOWN:
                print(message, file=sys.stderr)
            elif self.shown == _SHOWN + 1:
                print("(more: see the rows with an error in the output)", file=sys.stderr)
