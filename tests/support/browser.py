"""Debian's Chromium driven by Playwright, for the tests of web pages: a page that records its
console errors and uncaught exceptions, and refuses (and records) any request that would leave
the machine. No browser is ever downloaded: the system's Chromium is launched by path."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from tests.support.cli import ROOT, clean_env

CHROMIUM = Path("/usr/bin/chromium")
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
_LOCAL_HOSTS = {"127.0.0.1", "localhost", "[::1]", "::1"}


@dataclass
class Watched:
    """A page and what it did that a user would not want: errors, and requests off the machine."""

    page: Any
    errors: list[str] = field(default_factory=list)
    outside: list[str] = field(default_factory=list)


def _route(outside: list[str]) -> Any:
    def handle(route: Any) -> None:
        url = route.request.url
        parts = urlsplit(url)
        if parts.scheme in ("file", "data", "about", "blob") or parts.hostname in _LOCAL_HOSTS:
            route.continue_()
        else:
            outside.append(url)
            route.abort()

    return handle


@contextlib.contextmanager
def watched_page(browser: Any) -> Iterator[Watched]:
    """A fresh context and page whose console errors, page errors and outside requests are
    recorded on the returned object."""
    context = browser.new_context()
    page = context.new_page()
    watched = Watched(page)
    context.route("**/*", _route(watched.outside))
    page.on(
        "console",
        lambda m: watched.errors.append(f"console: {m.text}") if m.type == "error" else None,
    )
    page.on("pageerror", lambda e: watched.errors.append(f"page error: {e}"))
    try:
        yield watched
    finally:
        context.close()


@contextlib.contextmanager
def chromium() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS, headless=True)
        try:
            yield browser
        finally:
            browser.close()


@dataclass
class Viewer:
    """``composo view`` in a process of its own, and the address it printed."""

    process: subprocess.Popen[str]
    url: str

    def stop(self) -> None:
        self.process.kill()
        self.process.wait(10)
        if self.process.stdout is not None:
            self.process.stdout.close()


def start_view(*args: Any, cwd: Path = ROOT) -> Viewer:
    """Start ``python -m composo view ARGS --port 0`` and wait for the address it prints."""
    process = subprocess.Popen(
        [sys.executable, "-m", "composo", "view", *map(str, args), "--port", "0"],
        cwd=cwd,
        env=clean_env(PYTHONPATH=os.pathsep.join(p for p in (str(ROOT),) if p)),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    if "http://" not in line:
        process.kill()
        process.wait(10)
        raise AssertionError(f"composo view did not start: {line!r}")
    url = line.split("http://", 1)[1].split()[0]
    return Viewer(process, "http://" + url)
