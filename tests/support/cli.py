"""Run the `composo` command line as a subprocess, and read the results files it writes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def clean_env(**extra: str) -> dict[str, str]:
    """The environment without any COMPOSO_* setting of the machine, plus ``extra``."""
    out = {k: v for k, v in os.environ.items() if not k.startswith("COMPOSO_")}
    out["COLUMNS"] = "200"
    out.update(extra)
    return out


def run_composo(
    *args: Any, timeout: float = 60, cwd: Path = ROOT
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "composo", *map(str, args)],
        capture_output=True,
        text=True,
        env=clean_env(),
        timeout=timeout,
        cwd=cwd,
    )


def read_rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]


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
