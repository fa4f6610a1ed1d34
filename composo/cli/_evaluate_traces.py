"""``composo evaluate-traces``: score an OTLP/JSON export's traces, one row per trace and criterion
(``index``: the trace's position, ``id``: its trace id); the rest is ``evaluate``'s."""

from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from composo.cli import _common as common
from composo.errors import ComposoValidationError

if TYPE_CHECKING:
    from composo.tracing._otlp import OtlpReader
    from composo.types import BatchResult


def _max_spans(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--max-spans",
        type=common.positive_int,
        default=None,
        metavar="N",
        help="spans one trace may have before it is reported as too large (default 10000)",
    )


add_arguments = functools.partial(
    common.add_run_arguments,
    metavar="FILE",
    input_help="OTLP/JSON trace export: one ExportTraceServiceRequest per line (the "
    "OpenTelemetry Collector's file exporter) or a single JSON document",
    output_help="results file (default: stdout); re-running with the same FILE resumes",
    own=_max_spans,
)


def run(args: argparse.Namespace) -> int:
    from composo.tracing._otlp import MAX_SPANS_PER_TRACE, OtlpReader

    source = Path(args.input)
    criteria, options = common.prepare(args, source, "FILE")  # a UsageError: exit 2
    state = _Run(args, criteria, source)
    reader = OtlpReader(source, max_spans=args.max_spans or MAX_SPANS_PER_TRACE)
    with state.client() as client:
        state.drain(client, state.items(reader), options)
    for problem in reader.problems:
        print(f"{source.name}: {problem}", file=sys.stderr)
    said = f"{state.traces} trace(s) read, {state.unusable} could not be evaluated"
    return state.end(lambda: print(said, file=sys.stderr), failed=bool(reader.problems))


class _Run(common.Run):
    """Turns the export's traces into batch items (error rows for those that form none)."""

    traces = 0
    unusable = 0

    def items(self, reader: OtlpReader) -> Iterator[dict[str, Any]]:
        from composo.types import BatchResult

        for item in reader:
            self.traces += 1
            converted = item.converted
            wanted = self.remaining(item.index)
            if not wanted:
                continue
            for note in converted.notes:
                self.say(f"trace {converted.trace_id}: {note}")
            if converted.trace is None:
                self.unusable += 1
                message = converted.error or f"trace {converted.trace_id}: no trace"
                self.say(message)
                error = ComposoValidationError(message)
                for criterion in wanted:
                    self.record(BatchResult(item.index, criterion, converted.trace_id, None, error))
                continue
            self.expect(item.index, len(wanted))
            yield {"trace": converted.trace, "id": converted.trace_id, "criteria": wanted}

    def record(self, result: BatchResult, where: str | None = None) -> None:
        row = self.write(result)  # on the loop's thread, as every result is
        error = None if row is None else row["error"]
        if error is not None and not error.startswith("ComposoValidationError"):
            self.say(f"trace {result.id}: {error}")
