"""Every ```python block in README.md and docs/ runs as written, as a user runs it: in its own
process, configured only by environment variables pointing at the suite's local server (and at
the loopback stand-ins for OpenAI and Anthropic). A block that is a pytest file runs under pytest
with ``--composo-local``. A block that is one of the offline examples runs once, as that example;
the Ray and Spark blocks run in tests/test_ray.py and tests/test_spark.py, on their cluster."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.anthropic_standin import AnthropicStandIn
from tests.support.openai_standin import OpenAIStandIn
from tests.support.servers import ServerProcess

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
FENCE = re.compile(r"^( *)```python\n(.*?)^\1```$", re.M | re.S)
# A first line such as ``# my_package/composo_plugin.py`` names the file the block is.
NAMED = re.compile(r"#\s*([\w/]+\.py)\b")


def blocks() -> list[tuple[str, str]]:
    found = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for m in FENCE.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            found.append((f"{page.relative_to(ROOT)}:{line}", textwrap.dedent(m.group(2))))
    return found


BLOCKS = blocks()
PROVIDERS = ("COMPOSO_", "OPENAI_", "ANTHROPIC_")  # what a block's process is given, and only that


# The offline examples of examples/README.md that no other test module runs.
OFFLINE_EXAMPLES = ["langchain_callback.py", "llamaindex_evaluator.py"]


def as_shown(name: str) -> str:
    """``examples/<name>`` as a page shows it: without its docstring and the install check
    (``with needs(__doc__):``) around its imports."""
    source = (ROOT / "examples" / name).read_text(encoding="utf-8")
    tree = ast.parse(source)
    dropped: set[int] = set()
    unwrapped: set[int] = set()
    if ast.get_docstring(tree) is not None:
        dropped.update(range(1, (tree.body[0].end_lineno or 1) + 1))
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module == "_install":
            dropped.add(node.lineno)
        elif isinstance(node, ast.With) and ast.unparse(node.items[0]) == "needs(__doc__)":
            dropped.add(node.lineno)
            unwrapped.update(range(node.lineno + 1, (node.end_lineno or node.lineno) + 1))
    lines = [
        line.removeprefix("    ") if n in unwrapped else line
        for n, line in enumerate(source.splitlines(), start=1)
        if n not in dropped
    ]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()


@pytest.fixture(scope="module")
def anthropic_standin() -> Iterator[AnthropicStandIn]:
    with AnthropicStandIn() as standin:
        yield standin


def test_every_page_with_python_is_collected() -> None:
    pages = {where.split(":")[0] for where, _ in BLOCKS}
    assert {"README.md", "docs/evaluate.md", "docs/integrations/langchain.md"} <= pages
    # The README's first example is on its first screen.
    assert min(int(w.split(":")[1]) for w in {w for w, _ in BLOCKS if w.startswith("README")}) < 60


def test_the_readme_s_tracing_example_needs_no_model_provider_s_key() -> None:
    """It runs below with the Composo variables alone (a block is given a provider's variables
    only when it names that provider)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## Tracing\n", 1)[1].split("\n## ", 1)[0]
    (code,) = [textwrap.dedent(m.group(2)) for m in FENCE.finditer(section)]
    assert "evaluate_trace" in code and not re.search("openai|anthropic", code, re.I)
    assert "composo evaluate-traces examples/data/traces.jsonl" in section  # the offline CLI


def run_elsewhere(code: str) -> bool:
    """A block shown as an offline example runs once, as that example; a Ray or Spark program
    runs in the module that starts that cluster (tests/test_ray.py, tests/test_spark.py)."""
    return code.strip() in SHOWN or re.search(r"^(import ray|from pyspark)", code, re.M) is not None


SHOWN = {as_shown(name) for name in OFFLINE_EXAMPLES}


@pytest.mark.parametrize(
    ("where", "code"), [pytest.param(w, c, id=w) for w, c in BLOCKS if not run_elsewhere(c)]
)
def test_the_block_runs_as_written(
    where: str,
    code: str,
    tmp_path: Path,
    live: ServerProcess,
    openai_standin: OpenAIStandIn,
    anthropic_standin: AnthropicStandIn,
) -> None:
    named = NAMED.match(code.lstrip())
    script = tmp_path / (named.group(1) if named else "example.py")
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text(code, encoding="utf-8")
    # Run from a directory like the repository's top (the blocks read examples/data/...).
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    env = {k: v for k, v in os.environ.items() if not k.startswith(PROVIDERS)}
    env.update(COMPOSO_API_KEY=live.api_key, COMPOSO_BASE_URL=live.base_url)
    # A model provider's variables (its loopback stand-in's) only for a block that names it:
    # every other block runs as a user without that provider's key runs it.
    if re.search("openai", code, re.I):
        env.update(OPENAI_API_KEY="sk-stand-in", OPENAI_BASE_URL=openai_standin.base_url)
    if re.search("anthropic", code, re.I):
        env.update(ANTHROPIC_API_KEY="stand-in", ANTHROPIC_BASE_URL=anthropic_standin.base_url)
    if re.search(r"^def test_", code, re.M):
        (tmp_path / "pytest.ini").write_text("[pytest]\n")  # not this repository's settings
        args = ["-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:langsmith_plugin"]
        command = [sys.executable, *args, "--composo-local", str(script)]
    else:
        command = [sys.executable, str(script)]
    done = subprocess.run(
        command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=110
    )
    assert done.returncode == 0, f"{where}\n{done.stdout}\n{done.stderr}"


@pytest.mark.parametrize("name", OFFLINE_EXAMPLES)
def test_the_offline_example_runs(name: str, live: ServerProcess) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("COMPOSO_", "OPENAI_"))}
    env.update(COMPOSO_API_KEY=live.api_key, COMPOSO_BASE_URL=live.base_url)
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / name)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=110,
    )
    assert done.returncode == 0, done.stderr
    # Each prints the scores it got, as numbers (or None: the criterion did not apply).
    score = r"(?:score:?|->)\s*(?:0\.\d+|1(?:\.0+)?|None)\b"
    assert re.search(score, done.stdout, re.I), done.stdout
