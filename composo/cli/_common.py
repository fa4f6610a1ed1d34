"""What the commands share: the exit statuses and the usage error; the flags and checks of
``composo evaluate`` and ``evaluate-traces`` made before any request, the results file with its
resume note, the run's client (the platform, or a local server started for the run), the stream
of results with its first request alone, the guard that stops a run the server refuses, and the
end of a run (the summary and the run header); the connection flags and the refusal line of
``history`` and ``usage`` too."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import sys
from collections.abc import Callable, Generator, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from composo._core.limits import DEFAULT_TIMEOUT
from composo.cli import UsageError

if TYPE_CHECKING:
    from composo import Composo
    from composo._core.plan import BatchResult
    from composo.cli._results import Resume, RowWriter
    from composo.cli._summary import CriterionStats, RunInfo
    from composo.types import EvaluateOptions

__all__ = [
    "EXIT_FAILED",
    "Run",
    "add_connection_arguments",
    "add_listen_arguments",
    "add_run_arguments",
    "from_platform",
    "positive_int",
    "prepare",
]

# Every command's statuses are listed once, in docs/cli.md's "Exit statuses" (see EPILOG in
# composo/cli/__init__.py); 3 is _gates.EXIT_GATE, 4 _results.EXIT_BAD_ROWS.
EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_SERVER, EXIT_INTERRUPTED = 0, 1, 2, 5, 130
T = TypeVar("T")
SHOWN_ERRORS = 20  # problems said on stderr before the rest are left to the rows


def positive_int(text: str) -> int:
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


def add_run_arguments(
    parser: argparse.ArgumentParser,
    *,
    metavar: str,
    input_help: str,
    output_help: str,
    tag_help: str = "a tag sent with every evaluation (repeatable)",
    own: Callable[[argparse.ArgumentParser], object] | None = None,
) -> None:
    """A scoring run's flags: the input, ``-c``, ``-o``, ``--concurrency``, ``--tag``,
    ``--model-core``, where the evaluations go, the command's ``own``, then the quality gates'."""
    from composo.cli._gates import add_arguments as add_gate_arguments

    parser.add_argument("input", metavar=metavar, help=input_help)
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
    parser.add_argument("-o", "--output", type=Path, metavar="OUT.jsonl", help=output_help)
    parser.add_argument(
        "--concurrency",
        type=positive_int,
        default=5,
        metavar="N",
        help="requests in flight at once (default 5, what the platform advises)",
    )
    parser.add_argument("--tag", action="append", default=[], metavar="KEY=VALUE", help=tag_help)
    parser.add_argument(
        "--model-core",
        metavar="CORE",
        help="the evaluation model core, e.g. align-20251111 (default: the platform's)",
    )
    add_connection_arguments(parser)
    parser.add_argument(
        "--local",
        action="store_true",
        help="start a local server with the offline heuristic judge (no account needed; "
        "a development stand-in, not a quality judge)",
    )
    if own is not None:
        own(parser)
    add_gate_arguments(parser)


def add_connection_arguments(parser: argparse.ArgumentParser) -> None:
    """Where requests go and how long each may take: ``--base-url``, ``--api-key``,
    ``--timeout``."""
    parser.add_argument("--base-url", metavar="URL", help="API base URL (or COMPOSO_BASE_URL)")
    parser.add_argument("--api-key", metavar="KEY", help="API key (or COMPOSO_API_KEY)")
    parser.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT,
        metavar="SECONDS",
        help="seconds each request may take, retries included (default %(default)g)",
    )


def add_listen_arguments(
    parser: argparse.ArgumentParser, host: str, port: int, host_note: str = "", port_note: str = ""
) -> None:
    """``--host`` and ``--port`` of a command that listens."""
    parser.add_argument(
        "--host",
        default=host,
        metavar="ADDRESS",
        help=f"address to listen on (default %(default)s{host_note})",
    )
    parser.add_argument(
        "--port", type=int, default=port, metavar="N", help=f"port (default %(default)s{port_note})"
    )


def platform_client(args: argparse.Namespace) -> Composo:
    """The client ``--base-url``, ``--api-key`` and ``--timeout`` (and the environment)
    describe. Raises ``UsageError``: no API key, or a bad setting."""
    from composo import Composo
    from composo.errors import ComposoValidationError

    check_judge(args)
    try:
        return Composo(api_key=args.api_key, base_url=args.base_url, timeout=args.timeout)
    except ComposoValidationError as exc:  # a bad --base-url or --timeout
        raise UsageError(str(exc)) from None


def from_platform(args: argparse.Namespace, ask: Callable[[Composo], T]) -> T | int:
    """``ask(client)`` with :func:`platform_client`, or the exit status of its failure, said on
    stderr: 5 when no request can succeed (see :func:`refusal`), else 1."""
    from composo.errors import ComposoError

    try:
        with platform_client(args) as client:
            return ask(client)
    except ComposoError as exc:
        stop = refusal(args, exc)
        print(f"composo {args.command}: {stop or f'error: {exc}'}", file=sys.stderr)
        return EXIT_SERVER if stop else EXIT_FAILED


def refusal(args: argparse.Namespace, error: BaseException | None) -> str | None:
    """The one line saying why no request can succeed and which flag or variable to change,
    when ``error`` is a refused key (401, 403), nothing at the URL (404) or no server reached;
    ``None`` for any other (an item's own failure)."""
    from composo.errors import (
        APIConnectionError,
        AuthenticationError,
        NotFoundError,
        PermissionDeniedError,
    )

    env_url = os.environ.get("COMPOSO_BASE_URL") and not args.base_url
    url = "COMPOSO_BASE_URL" if env_url else "--base-url"
    if isinstance(error, (AuthenticationError, PermissionDeniedError)):
        key = "--api-key" if args.api_key else "COMPOSO_API_KEY"
        body = error.response_body
        said = body.get("detail") if isinstance(body, dict) else None
        return (
            f"the server refused the API key ({error.status_code}: {said or 'refused'}); "
            f"set the right one with {key}"
        )
    if isinstance(error, NotFoundError):
        return f"nothing there: {error.message.removeprefix('Not Found: ')}; change {url}"
    if isinstance(error, APIConnectionError):
        return f"{error.message}; or change {url}"
    return None


def prepare(
    args: argparse.Namespace, source: Path | None, name: str
) -> tuple[list[str], EvaluateOptions]:
    """The run's criteria (names and groups resolved) and the options every item is sent with,
    once the flags agree and ``source`` (``None``: stdin) is a file other than the results
    file; ``name`` is the input's name in the message. Raises ``UsageError``."""
    from composo.cli._criteria import resolve
    from composo.cli._gates import check_args

    check_args(args)  # the gates and CI files first: they name the flag at fault
    try:
        criteria = resolve(args.criteria)
        tags = parse_tags(args.tag)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if args.local and (args.base_url or args.api_key):
        raise UsageError("--local runs its own server; drop --base-url and --api-key")
    if source is not None:
        if not source.is_file():
            raise UsageError(f"{name}: no such file: {args.input}")
        if args.output is not None and args.output.resolve() == source.resolve():
            raise UsageError("-o: the results file cannot be the input file")
    return criteria, {"model_core": args.model_core, "tags": tags or None}


def check_judge(args: argparse.Namespace) -> None:
    """Something to evaluate with: the local server's packages for ``--local``, else an API key
    (``history`` and ``usage``, which have no ``--local``, too). Raises ``UsageError``."""
    local = getattr(args, "local", None)
    if local:
        try:
            import fastapi  # noqa: F401
            import uvicorn  # noqa: F401
        except ImportError:
            raise UsageError(
                "--local needs the local server's packages: pip install 'composo[cli]'"
            ) from None
    elif not (args.api_key or os.environ.get("COMPOSO_API_KEY", "").strip()):
        offline = "" if local is None else " (or use --local to try it offline)"
        raise UsageError(f"no API key: pass --api-key KEY or set COMPOSO_API_KEY{offline}")


def open_results(args: argparse.Namespace, criteria: list[str]) -> Rows:
    """Where the run's rows go: ``-o`` (resuming what an earlier run into it scored) or stdout;
    says on stderr what the run resumes. Raises ``UsageError``."""
    from composo.cli._results import RowWriter, prepare_resume

    try:
        resume = prepare_resume(args.output, set(criteria)) if args.output is not None else None
        writer = RowWriter(args.output, None if args.output is not None else sys.stdout.buffer)
    except OSError as exc:
        raise UsageError(f"-o: cannot write {args.output}: {exc.strerror or exc}") from None
    if resume is not None and (resume.kept or resume.dropped_errors or resume.repaired):
        retry = (
            f", {resume.dropped_errors} failed pair(s) to retry" if resume.dropped_errors else ""
        )
        repaired = ", damaged or duplicate lines removed" if resume.repaired else ""
        print(
            f"resuming {args.output}: {resume.kept} pair(s) already scored{retry}{repaired}",
            file=sys.stderr,
        )
    return Rows(criteria, resume, writer, {} if args.output is None else None)


@contextlib.contextmanager
def connect(args: argparse.Namespace, info: RunInfo, transport: Any = None) -> Iterator[Composo]:
    """The run's client: to ``--base-url`` (or the platform), or to a local server with the
    offline heuristic judge started for the run (``--local``) and stopped after it. It is
    allowed ``--concurrency`` requests at once, on as many kept-alive connections (fewer would
    close and reopen connections all run long), through the environment's proxies, each socket
    wait ending by the call's deadline; ``transport``: the run's own (the caching one)."""
    import httpx

    from composo import Composo
    from composo._core.connections import Connections
    from composo._core.network import Network

    with contextlib.ExitStack() as stack:
        base_url, api_key = args.base_url, args.api_key
        if args.local:
            from composo.server import LocalServer

            srv = stack.enter_context(LocalServer(judge="heuristic", latency=0.0))
            base_url, api_key = srv.base_url, srv.api_key
            info.judge = "heuristic"  # known before any answer (a run may score nothing)
            # That server runs in this process, on loopback: no proxy of the network between.
            transport = Connections(args.concurrency, network=Network(trust_env=False))
        # The connections' own pool sizes hold: an httpx client's limits= or proxies apply
        # only to the transport it builds itself.
        http = stack.enter_context(
            httpx.Client(transport=transport or Connections(args.concurrency))
        )
        yield stack.enter_context(
            Composo(
                api_key=api_key,
                base_url=base_url,
                max_concurrent_requests=args.concurrency,
                timeout=args.timeout,
                http_client=http,
            )
        )


def results(
    client: Composo, items: Iterable[dict[str, Any]], criteria: list[str], **kwargs: Any
) -> Generator[BatchResult, None, None]:
    """The run's results (``index``: the item's position in ``items``), its first request
    alone: a wrong key, URL or server is then refused once, the caller stopping at it, not
    once per request in flight. The rest go ``kwargs['concurrency']`` at a time."""
    import itertools

    stream = iter(items)
    head = next(stream, None)
    if head is None:
        return
    first, more = head["criteria"][:1], head["criteria"][1:]
    probe = client.evaluate_many_iter(
        [{**head, "criteria": first}], criteria, **kwargs | {"concurrency": 1}
    )
    with contextlib.closing(probe):
        yield from probe
    rest = [{**head, "criteria": more}] if more else []
    shift = 0 if rest else 1  # the position of ``stream``'s items in ``items``
    tail = client.evaluate_many_iter(itertools.chain(rest, stream), criteria, **kwargs)
    with contextlib.closing(tail):
        for result in tail:
            yield dataclasses.replace(result, index=result.index + shift)


class Notes:
    """What went wrong, said on stderr as it happens: the first ``SHOWN_ERRORS`` problems (once
    per record when ``key`` names one), then one line leaving the rest to the error rows."""

    def __init__(self) -> None:
        self.shown = 0
        self.keys: set[object] = set()

    def say(self, message: str, key: object = None) -> None:
        if self.shown > SHOWN_ERRORS or (key is not None and key in self.keys):
            return
        self.shown += 1
        last = self.shown > SHOWN_ERRORS
        self.keys.add(key)
        print(
            "(more: see the rows with an error in the output)" if last else message, file=sys.stderr
        )


class Guard:
    """Stops a run at the first answer every other request would share (:func:`refusal`): a
    refused key or nothing at the URL at once, no server reached before any answer at once
    and later after ``2 * concurrency + 10`` failed connections in a row; ``reason``: why."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.reason: str | None = None
        self.answered = False  # the server answered a request of this run
        self.unreachable = 0  # failed connections in a row

    def stops(self, error: BaseException | None) -> bool:
        """Whether the run stops at this result; its error is then the run's, not the item's
        (no row is written: a re-run sends it again)."""
        from composo.errors import APIConnectionError, APIStatusError, APITimeoutError

        lost = isinstance(error, APIConnectionError)
        self.unreachable = self.unreachable + 1 if lost else 0
        self.answered |= error is None or isinstance(error, APIStatusError)
        limit = 2 * self.args.concurrency + 10
        reason = refusal(self.args, error)
        if reason is None or (
            lost
            and self.unreachable < limit
            and (self.answered or isinstance(error, APITimeoutError))
        ):
            return False
        if lost and self.unreachable >= limit:
            reason = f"{self.unreachable} requests in a row failed; the last: {reason}"
        self.reason = self.reason or reason
        return True


@dataclasses.dataclass
class Rows:
    """Where a run's result rows go: the results writer, and the figures kept of them when they
    go to stdout (``tally``; ``None`` with ``-o``, which is read back); ``resume``: what an
    earlier run into ``-o`` already scored."""

    criteria: list[str]
    resume: Resume | None
    writer: RowWriter
    tally: dict[str, CriterionStats] | None
    # this run's rows: criterion -> source -> n, and how many it wrote
    sources: dict[str, dict[str, int]] = dataclasses.field(default_factory=dict)
    written: int = 0

    def row(self, result: BatchResult) -> dict[str, Any]:
        """A result's row, stamped with its provenance (judge, model, fresh or cached)."""
        from composo.cli._provenance import stamp

        return stamp(result.row(), result.provenance)

    def remaining(self, index: int) -> list[str]:
        """The criteria record ``index`` still needs."""
        return self.resume.remaining(index, self.criteria) if self.resume else self.criteria

    def write(self, row: dict[str, Any]) -> None:
        from composo.cli._summary import CriterionStats

        self.writer.write(row)
        self.written += 1
        if row.get("source") is not None:
            counts = self.sources.setdefault(row["criterion"], {})
            counts[row["source"]] = counts.get(row["source"], 0) + 1
        if self.tally is not None:
            self.tally.setdefault(row["criterion"], CriterionStats()).add(row)

    def close(self) -> None:
        self.writer.close()


class Pending:
    """Which record each item of the batch stream came from: stream position -> (the record's
    index, results still due). A record is remembered only while its requests are pending."""

    def __init__(self) -> None:
        self._due: dict[int, tuple[int, int, str | None]] = {}
        self._next = 0

    def add(self, index: int, results: int, where: str | None = None) -> None:
        """The next item of the stream is record ``index``, with ``results`` criteria; ``where``:
        the record's place in its file (``"line 5"``), for messages."""
        self._due[self._next] = (index, results, where)
        self._next += 1

    def take(self, position: int) -> tuple[int, str | None]:
        """The record of the result at stream ``position`` and its place, forgotten once all its
        results came."""
        index, left, where = self._due.pop(position)
        if left > 1:
            self._due[position] = (index, left - 1, where)
        return index, where


class Run:
    """A scoring run's side of the stream: which record each pending item came from, the guard
    that stops the run, the problems said on stderr, and whether Ctrl-C ended it. A command
    gives its ``record(result, where)``."""

    def __init__(self, args: argparse.Namespace, criteria: list[str], source: Path | None) -> None:
        """Raises ``UsageError``: nothing to evaluate with, or no results file to write."""
        from composo.cli._summary import RunInfo

        check_judge(args)
        self.args = args
        self.rows = open_results(args, criteria)
        shown = None if source is None else str(source.resolve())
        self.info = RunInfo(
            local=args.local, model_core=args.model_core, criteria=criteria, input=shown
        )
        self.guard = Guard(args)
        self.notes = Notes()
        self.pending = Pending()
        self.interrupted = False

    def record(self, result: BatchResult, where: str | None) -> None:
        raise NotImplementedError

    def write(self, result: BatchResult) -> dict[str, Any] | None:
        """The result's row, written; ``None`` when the result stops the run (no row: a re-run
        sends it again)."""
        if self.guard.stops(result.error):
            return None
        row = self.rows.row(result)
        self.rows.write(row)
        return row

    @contextlib.contextmanager
    def client(self, transport: Any = None) -> Iterator[Composo]:
        """:func:`connect`'s client; the rows are closed after it, Ctrl-C ends the run
        (``interrupted``) and a setting the client refuses is a ``UsageError``."""
        from composo.errors import ComposoValidationError

        try:
            with connect(self.args, self.info, transport) as client:
                yield client
        except ComposoValidationError as exc:
            raise UsageError(str(exc)) from None
        except KeyboardInterrupt:
            self.interrupted = True
        finally:
            self.rows.close()

    def drain(
        self,
        client: Composo,
        items: Iterable[dict[str, Any]],
        options: EvaluateOptions,
        each: Callable[[], object] = lambda: None,
        **kwargs: Any,
    ) -> None:
        """Every result of :func:`results` recorded under its record's index, until the guard
        stops the run; ``each`` is called per result."""
        stream = results(
            client,
            items,
            self.rows.criteria,
            concurrency=self.args.concurrency,
            **kwargs,
            **options,
        )
        with contextlib.closing(stream):  # Ctrl-C: requests in flight end now
            for result in stream:
                each()
                index, where = self.pending.take(result.index)
                self.record(dataclasses.replace(result, index=index), where)
                if self.guard.reason is not None:
                    break

    def end(
        self,
        then: Callable[[], object] = lambda: None,
        fatal: str | None = None,
        failed: bool = False,
    ) -> int:
        stopped = (self.guard.reason, self.interrupted, fatal)
        return end_run(self.args, self.info, self.rows, stopped, then, failed)


def end_run(
    args: argparse.Namespace,
    info: RunInfo,
    rows: Rows,
    stopped: tuple[str | None, bool, str | None],
    then: Callable[[], object] = lambda: None,
    failed: bool = False,
) -> int:
    """A run's exit status, and what it says: one line when stopped before any row; else the
    summary (of ``-o``, or of stdout's kept rows), ``then`` (the command's own closing), and the
    gates of a run that finished. ``stopped``: the server's reason, interrupted, the input's."""
    from composo.cli._finish import finish
    from composo.cli._results import iter_rows
    from composo.cli._summary import RunInfo, Summary, print_summary

    stop, interrupted, fatal = stopped
    if stop is not None and not rows.written:  # nothing to sum up: the one line says why
        print(f"composo {args.command}: {stop}", file=sys.stderr)
        return EXIT_SERVER
    stats = Summary.of(iter_rows(args.output)).criteria if args.output else (rows.tally or {})
    earlier = RunInfo.load(args.output) if args.output is not None else None
    info.account(stats, rows.sources, earlier)
    if args.output is not None:
        info.save(args.output)
    summary = Summary(stats, info)
    print_summary(summary, str(args.output) if args.output else "stdout", command=args.command)
    then()
    if interrupted:
        print("interrupted; run the same command again to resume", file=sys.stderr)
        return EXIT_INTERRUPTED
    for reason, status in ((stop, EXIT_SERVER), (fatal, EXIT_FAILED)):
        if reason is not None:
            print(f"composo {args.command}: stopped: {reason}", file=sys.stderr)
            return status
    gate_status = finish(args, summary)  # exit 3 when a gate fails
    return EXIT_FAILED if summary.errors or failed else gate_status
