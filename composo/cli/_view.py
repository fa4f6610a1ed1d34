"""``composo view RESULTS...``: serves the page ``composo report`` writes (:mod:`composo.cli._page`)
on loopback, for one or more results files, with what a file cannot do: each conversation sent
when its item is opened, and human reviews saved beside the results (``RESULTS.reviews.jsonl``,
which ``composo agreement --labels`` reads)."""

# No `from __future__ import annotations`: FastAPI reads the routes' annotations at runtime,
# and the classes they name are imported inside build_app.
import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from composo.cli._page import Run

__all__ = ["add_arguments", "build_app", "run"]

DEFAULT_PORT = 8765
_LOOPBACK = ("127.0.0.1", "localhost", "::1")
_MAX_REVIEW_BYTES = 64 * 1024


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.epilog = (
        "exit status: 0 stopped (Ctrl+C), 2 bad command line or results that cannot be read. "
        "Rows that are not results are listed on the page and on stderr."
    )
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
    parser.add_argument("--title", default="Evaluation results", help="the page title")
    parser.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to listen on (default %(default)s: this machine only; anyone who can "
        "reach another address can read the results and write reviews)",
    )
    parser.add_argument(
        "--port",
        type=int,
        default=DEFAULT_PORT,
        help="port (default %(default)s; 0 picks a free one)",
    )
    parser.add_argument("--open", action="store_true", help="open the page in a browser")


def build_app(runs: "list[Run]", title: str, hosts: list[str]) -> Any:
    """The viewer's ASGI app (FastAPI): the page (the report's, with reviews), an item's
    conversation, and reviews appended beside the results."""
    from fastapi import FastAPI, Request
    from fastapi.responses import HTMLResponse, JSONResponse
    from starlette.middleware.trustedhost import TrustedHostMiddleware

    from composo.cli._page import (
        ViewError,
        append_review,
        item_conversation,
        page_data,
        page_html,
        page_policy,
        read_reviews,
        review_record,
    )

    app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)
    # a page elsewhere cannot reach the viewer through a name it controls (DNS rebinding)
    app.add_middleware(TrustedHostMiddleware, allowed_hosts=hosts)
    base = page_data(runs, mode="view", title=title)
    headers = {
        "Content-Security-Policy": page_policy() + "; frame-ancestors 'none'",
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
        "Cache-Control": "no-store",
    }

    @app.get("/", response_class=HTMLResponse)
    def page() -> HTMLResponse:
        data = {**base, "reviews": [read_reviews(r.path) for r in runs]}
        return HTMLResponse(page_html(data), headers=headers)

    @app.get("/api/item")
    def item(key: str) -> JSONResponse:
        return JSONResponse({"conversation": item_conversation(runs, key)}, headers=headers)

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
        import json

        try:
            body = json.loads(raw)
            if not isinstance(body, dict):
                raise ViewError("a review is a JSON object")
            at = body.get("run", 0)
            if not isinstance(at, int) or isinstance(at, bool) or not 0 <= at < len(runs):
                raise ViewError(f"run {at!r}: a run's position, from 0 to {len(runs) - 1}")
            record = review_record(runs[at], body)
        except ValueError as exc:  # ViewError, or JSON that does not parse
            return JSONResponse({"detail": str(exc)}, 400)
        append_review(runs[at], record)
        return JSONResponse(record, headers=headers)

    return app


def run(args: argparse.Namespace) -> int:
    from composo.cli._page import ViewError, load_run

    def usage(message: str) -> int:
        print(f"composo view: error: {message}", file=sys.stderr)
        return 2

    if not 0 <= args.port <= 65535:
        return usage(f"--port {args.port}: use 0 to 65535")
    if args.data is not None and not args.data.is_file():
        return usage(f"--data: no such file: {args.data}")
    try:
        import uvicorn
    except ImportError:
        return usage("the viewer needs the cli extra: pip install 'composo[cli]'")
    runs = []
    for path in args.results:
        try:
            runs.append(load_run(path, args.data))
        except ViewError as exc:
            return usage(str(exc))
        runs[-1].checked.report("view")
    hosts = sorted({*_LOOPBACK, args.host})
    app = build_app(runs, args.title, hosts)
    from composo.server._local import _bind  # the local server's: one clear error per cause

    try:
        sock = _bind(args.host, args.port)
    except ValueError as exc:
        return usage(str(exc))
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
        import webbrowser

        webbrowser.open(url)
    config = uvicorn.Config(
        app, log_level="warning", access_log=False, server_header=False, lifespan="off"
    )
    try:
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        sock.close()
    return 0
