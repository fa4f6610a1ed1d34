"""Every install line a user can copy (README, docs, examples, workflow files) installs our
distributions from this checkout, never by name from the package index (whose ``composo`` is
another project), and pip accepts it as written."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
OURS = {
    "composo",
    "composo-sdk",
    "langchain-composo",
    "llama-index-evaluation-composo",
    "composo-plugin-example",
}
SOURCES = [
    ROOT / "README.md",
    *sorted((ROOT / "docs").rglob("*.md")),
    *sorted((ROOT / "integrations").glob("*/README.md")),
    *sorted(
        p
        for p in (ROOT / "examples").rglob("*")
        if p.suffix in {".md", ".py", ".yml", ".yaml", ".toml"}
    ),
]


def command_at(text: str, start: int) -> str:
    """The shell command starting at ``start``: up to a newline, ``&&``, ``;``, ``|``, a
    comment, a closing backtick or an unmatched ``)``, outside quotes and ``$(...)``."""
    depth, quote, i = 0, "", start
    while i < len(text):
        c = text[i]
        if quote:
            quote = "" if c == quote else quote
        elif c in "'\"":
            quote = c
        elif text.startswith("$(", i):
            depth += 1
            i += 1
        elif c == ")" and depth:
            depth -= 1
        elif c in "\n`;|)" or text.startswith(("&&", " #"), i):
            break
        i += 1
    return text[start:i].strip()


def install_lines() -> list[tuple[str, str]]:
    found = []
    for path in SOURCES:
        text = path.read_text(encoding="utf-8")
        for m in re.finditer(r"(?<![\w-])pip install ", text):
            found.append(
                (
                    f"{path.relative_to(ROOT)}:{text.count(chr(10), 0, m.start()) + 1}",
                    command_at(text, m.start()),
                )
            )
    return found


LINES = install_lines()
# Each distinct command is run once (several pages give the same line).
DISTINCT = list({command: (where, command) for where, command in reversed(LINES)}.values())[::-1]


def requirement_name(token: str) -> str | None:
    """The distribution a requirement token names from the index, or None for a path or a
    wheel file."""
    if token.startswith(("-", ".", "/", "$")) or "/" in token or token.endswith(".whl"):
        return None
    name = re.match(r"[A-Za-z0-9._-]+", token)
    return name.group(0).lower().replace("_", "-") if name else None


def named_from_the_index(command: str) -> list[str]:
    args = shlex.split(command)[2:]  # after "pip install"
    named, skip = [], False
    for token in args:
        if skip:
            skip = False
            continue
        if token in {"-r", "-c", "--requirement", "--constraint", "--find-links", "-f"}:
            skip = True
            continue
        name = requirement_name(token)
        if name is not None:
            named.append(name)
    return named


def test_the_scan_finds_the_documented_lines() -> None:
    where = {w.split(":")[0] for w, _ in LINES}
    assert {"README.md", "docs/install.md", "examples/ci/evaluations.yml"} <= where
    assert len(LINES) >= 10


@pytest.mark.parametrize(("where", "command"), LINES, ids=[w for w, _ in LINES])
def test_no_install_line_names_our_distributions_from_the_index(where: str, command: str) -> None:
    ours = [n for n in named_from_the_index(command) if n in OURS]
    assert not ours, f"{where}: `{command}` installs {ours} by name: install from the checkout"


def test_the_development_requirements_install_ours_from_the_checkout() -> None:
    for line in (ROOT / "requirements-dev.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        if not line:
            continue
        name = requirement_name(line.split()[-1] if line.startswith("-e") else line)
        assert name not in OURS, f"requirements-dev.txt: {line!r} comes from the index"


@pytest.fixture(scope="module")
def wheelhouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory holding ``dist/`` with wheels of the three distributions, for the lines that
    install built wheels."""
    where = tmp_path_factory.mktemp("wheels")
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
         "--wheel-dir", str(where / "dist"), str(ROOT), str(ROOT / "integrations" / "langchain"),
         str(ROOT / "integrations" / "llamaindex")],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr
    return where


@pytest.mark.timeout(300)
@pytest.mark.parametrize(("where", "command"), DISTINCT, ids=[w for w, _ in DISTINCT])
def test_each_install_line_resolves_ours_from_the_checkout(
    where: str, command: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """pip, asked to install the line as written (``--dry-run``, this environment's pip, from
    the repository's top directory), accepts it and takes every distribution of ours from a
    local path or file."""
    args = command.split(None, 2)[2]
    if "-r" in shlex.split(args):
        pytest.skip("a requirements file: .ci/run installs it; its lines are checked above")
    cwd = request.getfixturevalue("wheelhouse") if "dist/" in args else ROOT
    report = tmp_path / "report.json"
    done = subprocess.run(
        f'"{sys.executable}" -m pip install --dry-run --no-deps --no-build-isolation --quiet '
        f'--report "{report}" {args}',
        shell=True, cwd=cwd, capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert done.returncode == 0, f"{where}: `{command}`\n{done.stderr}"
    for item in json.loads(report.read_text())["install"]:
        name = item["metadata"]["name"].lower().replace("_", "-")
        if name in OURS:
            url = item["download_info"]["url"]
            assert url.startswith("file:"), f"{where}: {name} would come from {url}"
