"""What a stranger meets first stays true: one version, named by the changelog; a README that
fits, opening with the set-up commands CI runs; every example listed in examples/README.md."""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VERSION = re.search(r'__version__ = "([^"]+)"', (ROOT / "composo/_version.py").read_text())


def test_the_changelog_top_entry_is_the_current_version() -> None:
    assert VERSION is not None
    entries = re.findall(r"^## \[([^\]]+)\]", (ROOT / "CHANGELOG.md").read_text(), re.M)
    assert entries and entries[0] == VERSION.group(1)


def test_the_integrations_take_the_version_from_the_core() -> None:
    for name in ("langchain", "llamaindex"):
        here = ROOT / "integrations" / name
        text = (here / "pyproject.toml").read_text()
        assert not re.search(r"^version\s*=", text, re.M)
        assert 'dynamic = ["version"]' in text
        path = re.search(r'\[tool\.hatch\.version\]\npath = "([^"]+)"', text)
        assert path is not None
        assert (here / path.group(1)).resolve() == (ROOT / "composo/_version.py").resolve()


def test_the_readme_fits_and_starts_with_what_ci_runs() -> None:
    readme = (ROOT / "README.md").read_text().splitlines()
    assert len(readme) <= 250
    assert readme.index("```python") < 60
    ci = (ROOT / ".ci/run").read_text().splitlines()
    test_command = ci[ci.index("# The README's test command:") + 1]
    commands = [line for line in readme if "pip install" in line]
    assert test_command in commands[1], (test_command, commands[:2])
    # Whatever lane the test command leaves out, the README names and CI runs.
    assert f"`{ci[ci.index(test_command) + 2]}`" in "\n".join(readme)
    assert commands[0].startswith("python3 -m venv .venv && . .venv/bin/activate && ")


def test_no_page_speaks_in_changelog_sentences() -> None:
    pages = [ROOT / "README.md", *(ROOT / "docs").rglob("*.md")]
    for page in pages:
        text = page.read_text()
        assert not re.search(r"\(was [0-9]|\bnow leads\b", text), page


def test_examples_readme_lists_every_example() -> None:
    listed = (ROOT / "examples/README.md").read_text()
    for path in sorted((ROOT / "examples").iterdir()):
        if path.name.startswith(("_", ".")) or path.name == "README.md":
            continue
        shown = path.name + ("/" if path.is_dir() else "")
        assert f"`{shown}`" in listed, shown


def release_step(name: str) -> str:
    import yaml

    doc = yaml.safe_load((ROOT / "examples/ci/release.yml").read_text())
    (step,) = [s for s in doc["jobs"]["build"]["steps"] if s.get("name") == name]
    return str(step["run"])


def test_the_release_workflow_refuses_a_tag_that_is_not_the_version() -> None:
    import subprocess

    check = release_step("The tag is the version in composo/_version.py")
    version = VERSION.group(1) if VERSION else ""
    path = f"{Path(sys.executable).parent}:/usr/bin:/bin"  # `python`: this interpreter
    for tag, ok in ((f"v{version}", True), ("v9.9.9", False)):
        done = subprocess.run(
            ["bash", "-e", "-c", check],
            cwd=ROOT,
            env={"PATH": path, "GITHUB_REF_NAME": tag},
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert (done.returncode == 0) is ok, (tag, done.stderr)
