"""The CI example runs as written: its test and evaluation steps, against the local server."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from tests.support.cli import ROOT, clean_env, read_rows
from tests.support.servers import ServerProcess

WORKFLOW = ROOT / "examples" / "ci" / "evaluations.yml"
# pytest11 entry points of packages that the workflow's `pip install -e ".[cli]" pytest
# pytest-xdist` does not install: pytest-asyncio, pytest-timeout, hypothesis, langsmith.
NOT_IN_THE_JOB = ("asyncio", "timeout", "hypothesispytest", "langsmith_plugin")


def steps() -> dict[str, Any]:
    doc = yaml.safe_load(WORKFLOW.read_text())
    (job,) = doc["jobs"].values()
    return {s.get("name", s.get("uses")): s for s in job["steps"]}


def run_step(step: dict[str, Any], where: Path, env: dict[str, str]) -> Any:
    """A step's script in bash. In the job, the Python that setup-python provides (and its
    scripts: `pytest`, `composo`) is first on PATH; here it is this interpreter's environment,
    whether or not it is activated."""
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    return subprocess.run(
        ["bash", "-e", "-c", step["run"]],
        capture_output=True,
        text=True,
        cwd=where,
        env=clean_env(**env, PATH=path),
        timeout=300,
    )


def test_the_workflow_steps_pass_against_a_local_server(
    live: ServerProcess, tmp_path: Path
) -> None:
    found = steps()
    # what NOT_IN_THE_JOB is measured against
    assert found["Install"]["run"] == 'pip install -e ".[cli]" pytest pytest-xdist'
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    summary = tmp_path / "step-summary.md"
    env = {
        # The job's pytest autoloads the plugins its install step brings (composo's, xdist's, and
        # anyio's and platformdirs' through composo[cli]); the ones this checkout's development
        # install adds beyond that are not in the job, and would cost seconds per process.
        "PYTEST_ADDOPTS": " ".join(f"-p no:{p}" for p in NOT_IN_THE_JOB),
        "COMPOSO_API_KEY": live.api_key,
        "COMPOSO_BASE_URL": live.base_url,
        "GITHUB_STEP_SUMMARY": str(summary),
    }

    tests = run_step(found["Quality tests (pytest plugin)"], tmp_path, env)
    assert tests.returncode == 0, tests.stdout + tests.stderr
    assert "composo evaluations" in tests.stdout
    assert len(read_rows(tmp_path / "test-evaluations.jsonl")) >= 5

    gated = run_step(found["Dataset evaluation with gates"], tmp_path, env)
    assert gated.returncode == 0, gated.stderr
    assert gated.stderr.count("gate passed") == 2
    assert "| rag_faithfulness |" in summary.read_text()
    assert (tmp_path / "junit.xml").read_text().startswith("<?xml")

    report = run_step(found["Report"], tmp_path, env)
    assert report.returncode == 0 and (tmp_path / "report.html").is_file()
    uploaded = found["actions/upload-artifact@v4"]["with"]["path"].split()
    assert all((tmp_path / p).is_file() for p in uploaded)
