"""Every example of docs/platform-api.md runs as written against a local server: the Python
blocks in order, then each ``composo`` command line."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from tests.support.cli import clean_env, run_cli
from tests.support.servers import ServerProcess

PAGE = Path(__file__).resolve().parents[1] / "docs" / "platform-api.md"
KEY = "platform-docs-key-0123"


def blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", PAGE.read_text(encoding="utf-8"), re.S)


def test_the_page_has_examples() -> None:
    assert len(blocks("python")) == 3 and len(blocks("console")) == 1


def test_every_example_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with ServerProcess(api_keys=(KEY,), extra_args=("--rate-limit", "120/min")) as srv:
        monkeypatch.setenv("COMPOSO_API_KEY", KEY)
        monkeypatch.setenv("COMPOSO_BASE_URL", srv.base_url)
        for code in blocks("python"):
            exec(compile(code, str(PAGE), "exec"), {})
        printed = capsys.readouterr().out
        assert "1 requests this month" in printed
        assert "120 requests a minute" in printed
        assert "Reward responses that are concise" in printed
        env = clean_env(COMPOSO_API_KEY=KEY, COMPOSO_BASE_URL=srv.base_url)
        for line in blocks("console")[0].strip().splitlines():
            argv = shlex.split(line)
            assert argv[0] == "composo"
            done = run_cli(*argv[1:], cwd=tmp_path, env=env)
            assert done.returncode == 0, f"{line}: {done.stderr}"
    assert len((tmp_path / "history.jsonl").read_text().splitlines()) == 1
    assert (tmp_path / "history.parquet").stat().st_size > 0
