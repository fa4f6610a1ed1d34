"""``composo view RESULTS...``: serves the report's page on loopback, with what a file cannot do:
conversations sent as items open, reviews saved beside the results (for ``composo agreement``)."""

# No `from __future__ import annotations`: FastAPI reads the routes' annotations at runtime,
# and the classes they name are imported inside build_app.
import argparse
import contextlib
import json
import sys
import webbrowser
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from composo.cli import UsageError
from composo.cli import _report as report  # the page it writes, its data and conversations
from composo.cli._common import add_listen_arguments
from composo.cli._results import ResultsError, RowWriter, json_object, valid_score

if TYPE_CHECKING:
    from composo.cli._report import Run

DEFAULT_PORT = 8765
_LOOPBACK = ("127.0.0.1", "localhost", "::1")
_MAX_REVIEW_BYTES = 64 * 1024


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "results",
        type=Path,
        nargs="+",
        metavar="RESULTS",
        help="`composo evaluate` output; with two or more, what changed against the first",
    )
    parser.add_argument(
        "--data",
        type=Path,
        metavar="INPUT",
        help="the evaluated dataset, for the conversations (default: the INPUT recorded next "
        "to each results file)",
    )
    parser.add_argument("--title", default="Evaluation results", metavar="TEXT", help="page title")
    add_listen_arguments(
        parser,
        "127.0.0.1",
        DEFAULT_PORT,
        ": this machine only; anyone who can reach another address can read the results and "
        "write reviews",
        "; 0 picks a free one",
    )
    parser.add_argument("--open", action="store_true", help="open the page in a browser")


def build_app(runs: "list[Run]", title: str, hosts: list[str]) -> Any:
    """The viewer's app: the page, an item's conversation, reviews appended."""
    from fastapi import FastAPI, Request
    from fastapi.responses import HTMLResponse, JSONResponse
    from starlette.middleware.trustedhost import TrustedHostMiddleware

    app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)
    # a page elsewhere cannot reach the viewer through a name it controls (DNS rebinding)
    app.add_middleware(TrustedHostMiddleware, allowed_hosts=hosts)
    base = report.page_data(runs, mode="view", title=title)
    items = {item["key"]: item for item in base["items"]}
    headers = {
        "Content-Security-Policy": report.page_policy() + "; frame-ancestors 'none'",
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
        "Cache-Control": "no-store",
    }

    @app.get("/", response_class=HTMLResponse)
    def page() -> HTMLResponse:
        data = {**base, "reviews": [read_reviews(r.path) for r in runs]}
        return HTMLResponse(report.page_html(data), headers=headers)

    @app.get("/api/item")
    def item(key: str) -> JSONResponse:
        found = items.get(key)
        shown = report.conversation(report.record_of(runs, found)) if found is not None else None
        return JSONResponse({"conversation": shown}, headers=headers)

    @app.post("/api/review")
    async def review(request: Request) -> JSONResponse:
        kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if kind != "application/json":
            return JSONResponse({"detail": "send the review as application/json"}, 415)
        origin = request.headers.get("origin")
        if origin is not None and origin != f"{request.url.scheme}://{request.url.netloc}":
            return JSONResponse({"detail": "reviews are taken from the viewer's own page"}, 403)
        raw = await request.body()
        if len(raw) > _MAX_REVIEW_BYTES:
            return JSONResponse({"detail": "a review is at most 64 KiB"}, 413)
        try:
            body = json.loads(raw)
            if not isinstance(body, dict):
                raise ResultsError("a review is a JSON object")
            at = body.get("run", 0)
            if not isinstance(at, int) or isinstance(at, bool) or not 0 <= at < len(runs):
                raise ResultsError(f"run {at!r}: a run's position, from 0 to {len(runs) - 1}")
            record = review_record(runs[at], body)
        except ValueError as exc:  # ResultsError, or JSON that does not parse
            return JSONResponse({"detail": str(exc)}, 400)
        append_review(runs[at], record)
        return JSONResponse(record, headers=headers)

    return app


def run(args: argparse.Namespace) -> int:
    if not 0 <= args.port <= 65535:
        raise UsageError(f"--port {args.port}: use 0 to 65535")
    try:
        import uvicorn
    except ImportError:
        raise UsageError("the viewer needs the cli extra: pip install 'composo[cli]'") from None
    runs = report.load_runs(args.results, args.data, "view")  # a ResultsError: exit 2
    hosts = sorted({*_LOOPBACK, args.host})
    app = build_app(runs, args.title, hosts)
    from composo.server._local import listening_socket  # one clear error per cause

    try:
        sock = listening_socket(args.host, args.port)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    sock.listen(128)  # before the address is printed: a browser opened on it gets the page
    port = sock.getsockname()[1]
    shown = f"[{args.host}]" if ":" in args.host else args.host
    url = f"http://{shown}:{port}/"
    if args.host not in _LOOPBACK:
        print(
            f"composo view: listening on {args.host}: anyone who can reach it can read these "
            "results and write reviews",
            file=sys.stderr,
        )
    print(f"composo view: {url} (Ctrl+C to stop)", flush=True)
    if args.open:
        webbrowser.open(url)
    config = uvicorn.Config(
        app,
        log_level="warning",
        access_log=False,
        server_header=False,
        lifespan="off",
        ws="none",
    )
    with sock:
        uvicorn.Server(config).run(sockets=[sock])
    return 0


# -- reviews ------------------------------------------------------------------------------------

VERDICTS = ("agree", "disagree")
_COMMENT_CAP = 4000


def reviews_path(results: Path) -> Path:
    """Reviews live beside the results, never inside them."""
    return results.with_name(results.name + ".reviews.jsonl")


def read_reviews(results: Path) -> dict[str, dict[str, dict[str, Any]]]:
    """key -> criterion -> the latest review (a later line replaces an earlier one)."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    path = reviews_path(results)
    if not path.is_file():
        return out
    with path.open("rb") as f:
        for line in f:
            record = json_object(line) or {}
            ident, criterion = record.get("id"), record.get("criterion")
            if isinstance(ident, str) and isinstance(criterion, str):
                out.setdefault(ident, {})[criterion] = record
    return out


def review_record(run: "Run", body: dict[str, Any]) -> dict[str, Any]:
    """A review posted by the page, checked against the run, as the line to append. Its
    ``label`` is what ``composo agreement`` reads: the reviewer's own score, the judge's score
    when they agreed, the other verdict of a pass/fail criterion when they disagreed."""
    key, criterion = body.get("id"), body.get("criterion")
    rows = zip(run.rows, run.keys, strict=True)
    row = next((r for r, k in rows if k == key and r["criterion"] == criterion), None)
    if row is None:
        raise ResultsError(f"id {key!r} with that criterion is not an item of {run.path.name}")
    verdict, score, comment = _review_fields(body)
    judged = row.get("score")
    return {
        "id": key,
        "criterion": criterion,
        "label": _label(score, verdict, judged, str(criterion)),
        "verdict": verdict,
        "score": None if score is None else float(score),
        "judge_score": judged,
        "comment": comment,
        "at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }


def _review_fields(body: dict[str, Any]) -> tuple[Any, Any, str]:
    """The review's verdict, score and comment, checked."""
    verdict = body.get("verdict")
    if verdict is not None and verdict not in VERDICTS:
        raise ResultsError(f"verdict {verdict!r}: use 'agree', 'disagree' or null")
    score = body.get("score")
    if score is not None and not valid_score(score):
        raise ResultsError(f"score {score!r}: your score is a number from 0 to 1, or null")
    comment = body.get("comment") or ""
    if not isinstance(comment, str) or len(comment) > _COMMENT_CAP:
        raise ResultsError(f"comment: text of at most {_COMMENT_CAP} characters")
    return verdict, score, comment


def _label(score: Any, verdict: Any, judged: Any, criterion: str) -> float | None:
    from composo._core.wire import is_binary

    if score is not None:
        return float(score)
    if verdict == "agree" and judged is not None:
        return float(judged)
    if verdict == "disagree" and judged is not None and is_binary(criterion):
        return 0.0 if float(judged) >= 0.5 else 1.0
    return None


def append_review(run: "Run", record: dict[str, Any]) -> None:
    """One line, one write, appended and synced: a review is on disk once the page says so."""
    with contextlib.closing(RowWriter(reviews_path(run.path))) as writer:
        writer.write(record, sync=True)
