"""What the commands share: the exit statuses, the flags and checks of a scoring run
(``evaluate``, ``evaluate-traces``) and the run itself (:class:`Run`), and the connection flags
and refusal line of ``history`` and ``usage``."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import itertools
import os
import sys
from collections.abc import Callable, Generator, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from composo import cli, errors
from composo._core.limits import DEFAULT_TIMEOUT
from composo.cli import UsageError
from composo.cli._gates import add_arguments as add_gate_arguments
from composo.cli._gates import check_args
from composo.cli._names import resolve
from composo.cli._results import RowWriter, iter_rows, prepare_resume
from composo.cli._summary import CriterionStats, RunInfo, Summary, print_summary, summary_markdown

if TYPE_CHECKING:
    from composo import Composo
    from composo._core.plan import BatchResult
    from composo.types import EvaluateOptions

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


def add_run_arguments(
    parser: argparse.ArgumentParser,
    *,
    metavar: str,
    input_help: str,
    output_help: str,
    tag_help: str = "a tag sent with every evaluation (repeatable)",
    own: Callable[[argparse.ArgumentParser], object] | None = None,
) -> None:
    """A scoring run's flags, the command's ``own``, then the quality gates'."""
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
    """``--base-url``, ``--api-key``, ``--timeout``."""
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


def from_platform(args: argparse.Namespace, ask: Callable[[Composo], T]) -> T | int:
    """``ask(client)``, or its failure said on stderr and its exit status (5 or 1); a bad
    ``--base-url`` or ``--timeout`` is a ``UsageError``."""
    from composo import Composo

    check_judge(args)
    try:
        client = Composo(api_key=args.api_key, base_url=args.base_url, timeout=args.timeout)
    except errors.ComposoValidationError as exc:
        raise UsageError(str(exc)) from None
    try:
        with client:
            return ask(client)
    except errors.ComposoError as exc:
        stop = refusal(args, exc)
        print(f"composo {args.command}: {stop or f'error: {exc}'}", file=sys.stderr)
        return cli.EXIT_SERVER if stop else cli.EXIT_FAILED


def refusal(args: argparse.Namespace, error: BaseException | None) -> str | None:
    """Why no request can succeed and what to change; ``None`` for an item's own failure."""
    env_url = os.environ.get("COMPOSO_BASE_URL") and not args.base_url
    url = "COMPOSO_BASE_URL" if env_url else "--base-url"
    if isinstance(error, (errors.AuthenticationError, errors.PermissionDeniedError)):
        key = "--api-key" if args.api_key else "COMPOSO_API_KEY"
        body = error.response_body
        said = body.get("detail") if isinstance(body, dict) else None
        return (
            f"the server refused the API key ({error.status_code}: {said or 'refused'}); "
            f"set the right one with {key}"
        )
    if isinstance(error, errors.NotFoundError):
        return f"nothing there: {error.message.removeprefix('Not Found: ')}; change {url}"
    if isinstance(error, errors.APIConnectionError):
        return f"{error.message}; or change {url}"
    return None


def prepare(
    args: argparse.Namespace, source: Path | None, name: str
) -> tuple[list[str], EvaluateOptions]:
    """The run's criteria and the options each item is sent with. Raises ``UsageError``."""
    try:
        criteria = resolve(args.criteria)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    check_args(args, criteria)  # the gates and CI files before the rest: they name the flag
    tags: dict[str, str] = {}
    for pair in args.tag:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UsageError(f"--tag: expected KEY=VALUE, got {pair!r}")
        tags[key] = value
    if args.local and (args.base_url or args.api_key):
        raise UsageError("--local runs its own server; drop --base-url and --api-key")
    if source is not None:
        if not source.is_file():
            raise UsageError(f"{name}: no such file: {args.input}")
        if args.output is not None and args.output.resolve() == source.resolve():
            raise UsageError("-o: the results file cannot be the input file")
    return criteria, {"model_core": args.model_core, "tags": tags or None}


def check_judge(args: argparse.Namespace) -> None:
    """The local server's packages for ``--local``, else an API key. Raises ``UsageError``."""
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


def results(
    client: Composo, items: Iterable[dict[str, Any]], criteria: list[str], **kwargs: Any
) -> Generator[BatchResult, None, None]:
    """The run's results, its first request alone: a wrong key, URL or server is refused once,
    not once per request in flight."""
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


class Guard:
    """Stops a run at the first answer every other request would share (:func:`refusal`); no
    server reached stops it before any answer, later after ``2 * concurrency + 10`` in a row."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.reason: str | None = None
        self.answered = False  # the server answered a request of this run
        self.unreachable = 0  # failed connections in a row

    def stops(self, error: BaseException | None) -> bool:
        lost = isinstance(error, errors.APIConnectionError)
        self.unreachable = self.unreachable + 1 if lost else 0
        self.answered |= error is None or isinstance(error, errors.APIStatusError)
        limit = 2 * self.args.concurrency + 10
        reason = refusal(self.args, error)
        if reason is None or (
            lost
            and self.unreachable < limit
            and (self.answered or isinstance(error, errors.APITimeoutError))
        ):
            return False
        if lost and self.unreachable >= limit:
            reason = f"{self.unreachable} requests in a row failed; the last: {reason}"
        self.reason = self.reason or reason
        return True


class Run:
    """One scoring run: its results file (``-o``, resumed, or stdout), its record, which record
    each pending item of the stream came from, the guard that stops it and the problems it says.
    A command gives ``record(result, where)``."""

    def __init__(self, args: argparse.Namespace, criteria: list[str], source: Path | None) -> None:
        """Raises ``UsageError``: nothing to evaluate with, or ``-o`` cannot be written."""
        check_judge(args)
        out = args.output
        try:
            self.resume = prepare_resume(out, set(criteria)) if out is not None else None
            self.writer = RowWriter(out, None if out is not None else sys.stdout.buffer)
        except OSError as exc:
            raise UsageError(f"-o: cannot write {out}: {exc.strerror or exc}") from None
        done = self.resume
        if done is not None and (done.kept or done.dropped_errors or done.repaired):
            retry = (
                f", {done.dropped_errors} failed pair(s) to retry" if done.dropped_errors else ""
            )
            repaired = ", damaged or duplicate lines removed" if done.repaired else ""
            print(
                f"resuming {out}: {done.kept} pair(s) already scored{retry}{repaired}",
                file=sys.stderr,
            )
        self.args, self.criteria = args, criteria
        shown = None if source is None else str(source.resolve())
        self.info = RunInfo(
            local=args.local, model_core=args.model_core, criteria=criteria, input=shown
        )
        self.tally: dict[str, CriterionStats] = {}  # stdout's rows (-o is read back)
        self.sources: dict[str, dict[str, int]] = {}  # this run's rows: criterion -> source -> n
        self.written = 0
        self.guard = Guard(args)
        self.shown = 0  # problems said on stderr
        self.said: set[object] = set()  # the keys of those said
        # the stream's position -> (the record's index, results still due, its place)
        self.due: dict[int, tuple[int, int, str | None]] = {}
        self.fed = 0  # items given to the stream
        self.interrupted = False

    def remaining(self, index: int) -> list[str]:
        """The criteria record ``index`` still needs."""
        return self.resume.remaining(index, self.criteria) if self.resume else self.criteria

    def say(self, message: str, key: object = None) -> None:
        """What went wrong, on stderr as it happens: the first ``SHOWN_ERRORS`` problems (once
        per ``key``), then one line leaving the rest to the error rows."""
        if self.shown > SHOWN_ERRORS or (key is not None and key in self.said):
            return
        self.shown += 1
        self.said.add(key)
        last = self.shown > SHOWN_ERRORS
        print(
            "(more: see the rows with an error in the output)" if last else message, file=sys.stderr
        )

    def expect(self, index: int, results: int, where: str | None = None) -> None:
        """The stream's next item is record ``index`` (``where``: its place, for messages)."""
        self.due[self.fed] = (index, results, where)
        self.fed += 1

    def record(self, result: BatchResult, where: str | None) -> None:
        raise NotImplementedError

    def write(self, result: BatchResult) -> dict[str, Any] | None:
        """The result's row, written; ``None`` when it stops the run (a re-run sends it again)."""
        from composo._core.provenance import PLATFORM

        if self.guard.stops(result.error):
            return None
        # who judged (the platform's model core asked for, or another judge's model), fresh or
        # cached; all None for a pair not judged. Resumed rows keep what they said.
        p, row = result.provenance, result.row()
        platform = p is not None and p.judge == PLATFORM
        row["judge"] = p.judge if p is not None else None
        row["model_core"] = p.model if p is not None and platform else None
        row["judge_model"] = p.model if p is not None and not platform else None
        row["source"] = p.source if p is not None else None
        self.writer.write(row)
        self.written += 1
        if row.get("source") is not None:
            counts = self.sources.setdefault(row["criterion"], {})
            counts[row["source"]] = counts.get(row["source"], 0) + 1
        if self.args.output is None:
            self.tally.setdefault(row["criterion"], CriterionStats()).add(row)
        return row

    @contextlib.contextmanager
    def client(self, transport: Any = None) -> Iterator[Composo]:
        """The run's client (to a local heuristic server with ``--local``), ``--concurrency``
        connections kept alive; Ctrl-C ends the run and the results file is closed after it."""
        import httpx

        from composo import Composo
        from composo._core.connections import Connections
        from composo._core.network import Network

        args = self.args
        try:
            with contextlib.ExitStack() as stack:
                base_url, api_key = args.base_url, args.api_key
                if args.local:
                    from composo.server import LocalServer

                    srv = stack.enter_context(LocalServer(judge="heuristic", latency=0.0))
                    base_url, api_key = srv.base_url, srv.api_key
                    self.info.judge = "heuristic"  # known before any answer
                    # in this process, on loopback: no proxy of the network between
                    transport = Connections(args.concurrency, network=Network(trust_env=False))
                # an httpx client's limits= or proxies apply only to a transport it builds
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
        except errors.ComposoValidationError as exc:
            raise UsageError(str(exc)) from None
        except KeyboardInterrupt:
            self.interrupted = True
        finally:
            self.writer.close()

    def drain(
        self,
        client: Composo,
        items: Iterable[dict[str, Any]],
        options: EvaluateOptions,
        each: Callable[[], object] = lambda: None,
        **kwargs: Any,
    ) -> None:
        """Record every result under its record's index until the guard stops the run."""
        concurrency = self.args.concurrency
        stream = results(client, items, self.criteria, concurrency=concurrency, **kwargs, **options)
        with contextlib.closing(stream):  # Ctrl-C: requests in flight end now
            for result in stream:
                each()
                index, left, where = self.due.pop(result.index)
                if left > 1:
                    self.due[result.index] = (index, left - 1, where)
                self.record(dataclasses.replace(result, index=index), where)
                if self.guard.reason is not None:
                    break

    def end(
        self,
        then: Callable[[], object] = lambda: None,
        fatal: str | None = None,
        failed: bool = False,
    ) -> int:
        """The exit status, and what the run says: one line when stopped before any row; else
        the summary, ``then`` (the command's own closing), and the gates of a finished run."""
        args, out, stop = self.args, self.args.output, self.guard.reason
        if stop is not None and not self.written:  # nothing to sum up: the one line says why
            print(f"composo {args.command}: {stop}", file=sys.stderr)
            return cli.EXIT_SERVER
        stats = Summary.of(iter_rows(out)).criteria if out is not None else self.tally
        self.info.account(stats, self.sources, RunInfo.load(out) if out is not None else None)
        if out is not None:
            self.info.save(out)
        summary = Summary(stats, self.info)
        print_summary(summary, str(out) if out else "stdout", command=args.command)
        then()
        if self.interrupted:
            print("interrupted; run the same command again to resume", file=sys.stderr)
            return cli.EXIT_INTERRUPTED
        for reason, status in ((stop, cli.EXIT_SERVER), (fatal, cli.EXIT_FAILED)):
            if reason is not None:
                print(f"composo {args.command}: stopped: {reason}", file=sys.stderr)
                return status
        gate_status = self._gates(summary)
        return cli.EXIT_FAILED if summary.errors or failed else gate_status

    def _gates(self, summary: Summary) -> int:
        """Check the gates, say their outcomes and write the CI files; the exit status."""
        args = self.args
        summary.check(args.gates)
        for outcome in summary.outcomes:
            verdict = "passed" if outcome.passed else "FAILED"
            print(f"gate {verdict}: {outcome.describe()}", file=sys.stderr)
        failed = [o for o in summary.outcomes if not o.passed]
        if summary.set_aside:
            print(
                f"composo {args.command}: {summary.set_aside} row(s) of the results file have a "
                "score that is not a number from 0 to 1; set aside, not counted by the summary or "
                f"the gates (exit {cli.EXIT_BAD_ROWS} unless a gate failed); `composo report` "
                "lists them",
                file=sys.stderr,
            )
        if failed:
            print(
                f"composo {args.command}: {len(failed)} of {len(summary.outcomes)} quality "
                f"gate(s) failed (exit {cli.EXIT_GATE})",
                file=sys.stderr,
            )
        if args.junit_xml is not None and args.output is not None:
            from composo.cli._junit import write_junit

            write_junit(args.junit_xml, iter_rows(args.output), summary)
            print(f"wrote {args.junit_xml}", file=sys.stderr)
        if args.summary_md is not None:
            with args.summary_md.open("a", encoding="utf-8") as f:
                f.write(summary_markdown(summary))
            print(f"wrote {args.summary_md}", file=sys.stderr)
        return cli.EXIT_GATE if failed else cli.EXIT_BAD_ROWS if summary.set_aside else 0
