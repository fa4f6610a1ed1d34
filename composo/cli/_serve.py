"""``composo serve``: run the local Composo-compatible evaluation server in the foreground."""

from __future__ import annotations

import argparse
import os
import re
import sys
from dataclasses import replace
from functools import partial
from pathlib import Path

from composo.cli import UsageError
from composo.cli._common import add_listen_arguments
from composo.cli._names import resolve
from composo.errors import ComposoValidationError
from composo.server._config import (
    DEFAULT_HISTORY_DAYS,
    DEFAULT_HISTORY_ROWS,
    DEFAULT_HOST,
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_PORT,
    DEFAULT_TASK_LEASE,
    OtlpOptions,
)

_RATE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(?:/\s*(s|sec|second|m|min|minute|h|hour))?\s*$")
_UNITS = {60.0: ("s", "sec", "second"), 1.0: (None, "m", "min", "minute"), 1 / 60: ("h", "hour")}
_PER_MINUTE = {unit: factor for factor, units in _UNITS.items() for unit in units}


def parse_rate(text: str) -> float:
    """``"120/min"``, ``"5/s"``, ``"500/hour"`` or a bare number (per minute) -> per minute."""
    m = _RATE.match(text)
    if not m or float(m.group(1)) <= 0:
        raise argparse.ArgumentTypeError(
            f"--rate-limit: {text!r} is not a rate; write it like 120/min, 5/s or 500/hour"
        )
    return float(m.group(1)) * _PER_MINUTE[m.group(2)]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_listen_arguments(parser, DEFAULT_HOST, DEFAULT_PORT)
    parser.add_argument(
        "--judge",
        default="heuristic",
        metavar="NAME",
        help="heuristic (offline, deterministic development stand-in) or openai (an LLM on any "
        "OpenAI-compatible endpoint); plugins may add more (default: %(default)s)",
    )
    parser.add_argument("--judge-model", metavar="MODEL", help="model name for the openai judge")
    parser.add_argument(
        "--judge-base-url",
        metavar="URL",
        help="base URL of the judge's OpenAI-compatible API (default: OPENAI_BASE_URL)",
    )
    parser.add_argument(
        "--judge-api-key",
        metavar="KEY",
        help="API key for the judge's endpoint (default: OPENAI_API_KEY)",
    )
    parser.add_argument(
        "--api-key",
        action="append",
        default=None,
        metavar="KEY",
        help="accept only this API key (repeatable); without it, --api-key-file or "
        "COMPOSO_SERVER_API_KEYS (comma-separated), ANY key is accepted. Seen by other users in "
        "the process list: prefer the file or the variable",
    )
    parser.add_argument(
        "--api-key-file",
        type=Path,
        metavar="PATH",
        help="accept the API keys in this file, one a line (blank lines and # comments ignored)",
    )
    parser.add_argument(
        "--db",
        type=Path,
        metavar="FILE",
        help="SQLite file for background tasks (default: in the user cache dir)",
    )
    parser.add_argument(
        "--rate-limit",
        type=parse_rate,
        metavar="N/min",
        help="requests per minute per API key (per client address when no keys are set); "
        "over it, 429 with Retry-After",
    )
    parser.add_argument(
        "--rate-burst",
        type=int,
        metavar="N",
        help="requests a client may send at once after a pause, within --rate-limit "
        "(default: a minute's worth)",
    )
    parser.add_argument(
        "--max-body-bytes",
        type=int,
        default=DEFAULT_MAX_BODY_BYTES,
        metavar="BYTES",
        help="larger request bodies get 413 (default: %(default)s, 10 MiB)",
    )
    parser.add_argument(
        "--max-connections",
        type=int,
        default=DEFAULT_MAX_CONNECTIONS,
        metavar="N",
        help="open connections (or requests in hand) past which requests are answered 503: "
        "uvicorn's limit_concurrency (default: %(default)s)",
    )
    parser.add_argument(
        "--task-lease",
        type=float,
        default=DEFAULT_TASK_LEASE,
        metavar="SECONDS",
        help="how long the background tasks of a server that stopped answering stay with it "
        "before another server takes them over (default: %(default)s)",
    )
    parser.add_argument(
        "--history-days",
        type=float,
        default=DEFAULT_HISTORY_DAYS,
        metavar="DAYS",
        help="keep the evaluation history (read with POST /api/v1/evaluations/filter) this "
        "many days; 0 keeps none (default: %(default)s)",
    )
    parser.add_argument(
        "--history-max-rows",
        type=int,
        default=DEFAULT_HISTORY_ROWS,
        metavar="N",
        help="keep at most this many evaluations in the history (default: %(default)s)",
    )
    parser.add_argument(
        "--latency",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="artificial delay added to every evaluation (default: 0)",
    )
    parser.add_argument(
        "--dev-faults",
        action="store_true",
        help="enable /_dev/* to inject failures (also COMPOSO_SERVER_DEV_FAULTS=1); "
        "for testing clients only",
    )
    parser.add_argument(
        "--no-access-log",
        dest="access_log",
        action="store_false",
        help="do not log one line per request",
    )
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


def _otlp_options(args: argparse.Namespace) -> OtlpOptions | None:
    """The OTLP receiver ``--otlp`` asks for. Raises ``UsageError``."""
    if not args.otlp:
        if args.trace_criteria:
            raise UsageError("--trace-criteria needs --otlp")
        return None
    if not args.trace_criteria:
        raise UsageError(
            "--otlp needs at least one --trace-criteria CRITERION to evaluate traces against"
        )
    from composo.tracing._collector import TraceCollector
    from composo.tracing._otlp import MAX_SPANS_PER_TRACE

    try:
        criteria = resolve(args.trace_criteria)
    except ValueError as exc:
        raise UsageError(f"--trace-criteria: {exc}") from None
    if not args.otlp_results.parent.is_dir():
        raise UsageError(f"--otlp-results: no such directory: {args.otlp_results.parent}")
    sink = partial(
        TraceCollector,
        idle_seconds=args.otlp_idle,
        max_spans=args.otlp_max_spans or MAX_SPANS_PER_TRACE,
    )
    try:
        sink()  # the settings are checked now, before the port is bound
    except ComposoValidationError as exc:
        raise UsageError(f"--otlp: {exc}") from None
    return OtlpOptions(sink, tuple(criteria), args.otlp_results)


def read_key_file(path: Path) -> list[str]:
    """The keys in ``path``, one a line (``#`` lines ignored). Raises ``OSError``, or
    ``ValueError`` when it holds none."""
    keys = [
        line.strip()
        for line in path.read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]
    if not keys:
        raise ValueError(f"{path} holds no API key (one a line)")
    return keys


def run(args: argparse.Namespace) -> int:
    from composo.server._config import JudgeOptions, ServerConfig, default_db_path
    from composo.server._local import require_server_extra, serve_forever
    from composo.server._store import TaskStoreError

    try:
        require_server_extra()
    except ImportError as exc:
        raise UsageError(str(exc)) from None
    keys = list(args.api_key or [])
    if keys:
        print(
            "note: --api-key is visible to other users in the process list; prefer "
            "--api-key-file or COMPOSO_SERVER_API_KEYS",
            file=sys.stderr,
        )
    if args.api_key_file is not None:
        try:
            keys += read_key_file(args.api_key_file)
        except (OSError, ValueError) as exc:
            raise UsageError(f"--api-key-file: {exc}") from None
    env_keys = os.environ.get("COMPOSO_SERVER_API_KEYS", "")
    keys += [k.strip() for k in env_keys.split(",") if k.strip()]
    dev = args.dev_faults or os.environ.get("COMPOSO_SERVER_DEV_FAULTS", "") in ("1", "true", "yes")
    try:
        config = ServerConfig(
            host=args.host,
            port=args.port,
            judge=args.judge,
            judge_options=JudgeOptions(
                model=args.judge_model,
                api_key=args.judge_api_key or os.environ.get("OPENAI_API_KEY"),
                base_url=args.judge_base_url or os.environ.get("OPENAI_BASE_URL"),
            ),
            api_keys=tuple(dict.fromkeys(keys)),
            db=args.db or default_db_path(),
            rate_limit_per_minute=args.rate_limit,
            rate_limit_burst=args.rate_burst,
            dev_faults=dev,
            latency=args.latency,
            max_body_bytes=args.max_body_bytes,
            max_connections=args.max_connections,
            task_lease_seconds=args.task_lease,
            history_days=args.history_days,
            history_max_rows=args.history_max_rows,
        )
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    config = replace(config, otlp=_otlp_options(args))
    host = f"[{config.host}]" if ":" in config.host else config.host
    url = f"http://{host}:{config.port}"

    def banner() -> None:  # once the settings have proved usable, not before
        print(f"Composo local server ({config.judge} judge) on {url}")
        print(f"  export COMPOSO_BASE_URL={url}")
        # A key the user chose is never printed: banners end up in logs.
        if keys:
            n = len(config.api_keys)
            print(f"  export COMPOSO_API_KEY=...  # one of the {n} key(s) you configured")
        else:
            print("  export COMPOSO_API_KEY=any-key  # no keys configured: any key is accepted")
        if dev:
            print("  development fault switch ON (/_dev/*): for testing clients only")
        if args.otlp:
            print(f"  OTLP/HTTP traces: export to {url}/v1/traces")
        sys.stdout.flush()

    try:
        serve_forever(config, access_log=args.access_log, on_ready=banner)
    except TaskStoreError as exc:
        raise UsageError(f"--db: {exc}") from None
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    return 0
