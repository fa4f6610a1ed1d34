"""Run a file from examples/ as a user runs it: its own process, configured only by environment."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SCORE = r"(?:None|0(?:\.\d+)?|1(?:\.0+)?)"  # how an example prints a score


def run_example(name: str, env: dict[str, str]) -> list[str]:
    """Run ``examples/<name>`` with only these Composo/OpenAI variables; return its output lines."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("COMPOSO_", "OPENAI_"))}
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / name)],
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=60,
        cwd=EXAMPLES,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()
