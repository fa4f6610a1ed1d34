"""The ``--otlp`` options of ``composo serve``: wire ``composo.tracing``'s span collector into the
server's OTLP receiver (the command line is the layer that may import both)."""

from __future__ import annotations

import argparse
from pathlib import Path

__all__ = ["add_arguments", "configure"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "OTLP trace receiver",
        "accept OpenTelemetry traces (OTLP/HTTP, protobuf or JSON) at POST /v1/traces and "
        "evaluate each finished trace",
    )
    group.add_argument("--otlp", action="store_true", help="accept OTLP/HTTP traces at /v1/traces")
    group.add_argument(
        "--trace-criteria",
        action="append",
        default=[],
        metavar="CRITERION",
        help="evaluate every finished trace against this (a criterion, a name from `composo "
        "criteria`, or a group); repeatable; needed with --otlp",
    )
    group.add_argument(
        "--otlp-results",
        type=Path,
        default=Path("otlp-results.jsonl"),
        metavar="FILE",
        help="append one result row per trace and criterion here (default: %(default)s)",
    )
    group.add_argument(
        "--otlp-idle",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="a trace whose root span never arrives is finished after this long without a new "
        "span (default: %(default)s)",
    )
    group.add_argument(
        "--otlp-max-spans",
        type=int,
        default=None,
        metavar="N",
        help="spans one trace may have before it is reported as too large (default 10000)",
    )


def configure(args: argparse.Namespace) -> str | None:
    """Set up the receiver from ``args``; returns the problem with them, or ``None``."""
    from composo.server import _otlp

    if not args.otlp:
        if args.trace_criteria:
            return "--trace-criteria needs --otlp"
        _otlp.configure(None)
        return None
    if not args.trace_criteria:
        return "--otlp needs at least one --trace-criteria CRITERION to evaluate traces against"
    from composo.cli._criteria import resolve
    from composo.errors import ComposoValidationError
    from composo.tracing._collector import TraceCollector
    from composo.tracing._otlp import MAX_SPANS_PER_TRACE

    try:
        criteria = resolve(args.trace_criteria)
    except ValueError as exc:
        return f"--trace-criteria: {exc}"
    if not args.otlp_results.parent.is_dir():
        return f"--otlp-results: no such directory: {args.otlp_results.parent}"
    try:
        collector = TraceCollector(
            idle_seconds=args.otlp_idle, max_spans=args.otlp_max_spans or MAX_SPANS_PER_TRACE
        )
    except ComposoValidationError as exc:
        return f"--otlp: {exc}"
    _otlp.configure(_otlp.OtlpReceiver(collector, tuple(criteria), args.otlp_results))
    return None
