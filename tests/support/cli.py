"""Run the `composo` command line (in this process, or as a subprocess where a test needs a process
of its own), and read the results files it writes."""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def clean_env(**extra: str) -> dict[str, str]:
    """The environment without any COMPOSO_* setting of the machine, plus ``extra``."""
    out = {k: v for k, v in os.environ.items() if not k.startswith("COMPOSO_")}
    out["COLUMNS"] = "200"
    out.update(extra)
    return out


@contextlib.contextmanager
def _environment(env: dict[str, str]) -> Iterator[None]:
    """``os.environ`` is exactly ``env`` inside, and as it was afterwards."""
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


@contextlib.contextmanager
def _cwd(path: Path) -> Iterator[None]:
    saved = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(saved)


@contextlib.contextmanager
def _log_to(stream: io.TextIOBase) -> Iterator[None]:
    """The ``composo`` logger's records written to ``stream`` as a process with no logging set up
    writes them (logging's last-resort handler: the message alone, WARNING and up, to stderr),
    instead of reaching the test run's own handlers."""
    logger = logging.getLogger("composo")
    handler = logging.StreamHandler(stream)
    handler.setLevel(logging.WARNING)
    saved = logger.propagate
    logger.addHandler(handler)
    logger.propagate = False
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.propagate = saved


def run_cli(
    *args: Any,
    stdin: str | None = None,
    cwd: Path = ROOT,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """``composo ARGS`` run in this process by ``composo.cli.main``, as ``python -m composo`` runs
    it: its own stdin, stdout and stderr, the environment ``clean_env()`` (or ``env``), the
    working directory ``cwd``; all restored afterwards. A ``SystemExit`` (argparse) becomes the
    exit code."""
    from composo.cli import main

    argv = [str(a) for a in args]
    out_bytes, err_bytes = io.BytesIO(), io.BytesIO()
    out = io.TextIOWrapper(out_bytes, encoding="utf-8", newline="", write_through=True)
    err = io.TextIOWrapper(err_bytes, encoding="utf-8", newline="", write_through=True)
    # stdin is a real file, so that code reading its descriptor (CSV from stdin) works too
    with tempfile.TemporaryFile() as raw_in:
        raw_in.write((stdin or "").encode("utf-8"))
        raw_in.seek(0)
        inp = io.TextIOWrapper(raw_in, encoding="utf-8", newline="")
        saved = sys.stdin, sys.stdout, sys.stderr
        code: int
        try:
            with _environment(clean_env() if env is None else env), _cwd(cwd), _log_to(err):
                sys.stdin, sys.stdout, sys.stderr = inp, out, err
                try:
                    result = main(argv)
                    code = 0 if result is None else int(result)
                except SystemExit as exc:
                    c = exc.code
                    if c is None:
                        code = 0
                    elif isinstance(c, int):
                        code = c
                    else:
                        print(c, file=err)
                        code = 1
                finally:
                    out.flush()
                    err.flush()
        finally:
            sys.stdin, sys.stdout, sys.stderr = saved
            inp.detach()
    return subprocess.CompletedProcess(
        ["composo", *argv],
        code,
        out_bytes.getvalue().decode("utf-8", "replace"),
        err_bytes.getvalue().decode("utf-8", "replace"),
    )


def run_composo(*args: Any, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    """``composo ARGS``, run in this process (see ``run_cli``)."""
    return run_cli(*args, cwd=cwd)


def read_rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]


def page_data(page: Path | str) -> dict[str, Any]:
    """What a `composo report` page (or the viewer's) renders: its JSON data element, parsed."""
    text = page.read_text(encoding="utf-8") if isinstance(page, Path) else page
    element = text.split('<script type="application/json" id="composo-data">', 1)[1]
    data: dict[str, Any] = json.loads(element.split("</script>", 1)[0])
    return data


def write_rows(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def conversation(i: int, answer: str | None = None, **extra: Any) -> str:
    """One dataset line: a refund question and an answer that varies with ``i``."""
    text = (
        answer if answer is not None else "Returns within 30 days get a full refund. " * (1 + i % 3)
    )
    return json.dumps(
        {
            "id": f"q{i}",
            "messages": [
                {"role": "user", "content": f"Question {i}: how do refunds work for returns?"},
                {"role": "assistant", "content": text},
            ],
            **extra,
        }
    )
