"""The command line's rough edges on a first run: a mistyped flag gets the closest flag of the
command it was given to, a missing column is named with the command's own flags and the file's
real columns, and a row that cannot be used is reported by its line in the file and its id."""

from __future__ import annotations

import csv
import json
import re
import shlex
from pathlib import Path
from subprocess import CompletedProcess

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from composo.cli import SUBCOMMANDS
from tests.support.cli import read_rows, run_cli
from tests.support.servers import ServerProcess

CRITERION = "Reward answers that explain the refund policy"
GOOD_Q = "How do refunds work for returns?"
GOOD_A = "Returns within 30 days get a full refund."


def _evaluate(live: ServerProcess, data: Path, *args: object) -> CompletedProcess[str]:
    return run_cli(
        "evaluate", data, "-c", CRITERION, "--base-url", live.base_url, "--api-key",
        live.api_key, "--no-cache", *args,
    )  # fmt: skip


def _csv(path: Path, header: list[str], rows: list[list[str]]) -> Path:
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows(rows)
    return path


def _misspelt(flag: str) -> str:
    """``flag`` with two of its letters swapped, as fingers do."""
    body = flag.lstrip("-")
    i = max(1, len(body) // 2)
    swapped = body[: i - 1] + body[i] + body[i - 1] + body[i + 1 :]
    return flag[: len(flag) - len(body)] + swapped


def _long_flags(command: str) -> list[str]:
    """The long flags ``composo COMMAND``'s usage line shows."""
    sub = run_cli(command, "--help").stdout
    usage = sub[: sub.find("\n\n")]
    return sorted({f for f in re.findall(r"--[a-z][a-z-]{3,}", usage) if f != "--help"})


@pytest.mark.parametrize("command", list(SUBCOMMANDS))
def test_every_command_suggests_its_own_flag_for_a_typo(command: str) -> None:
    flags = _long_flags(command) or ["--help"]  # a command with no flags of its own
    for flag in flags:
        typo = _misspelt(flag)
        if typo == flag:
            continue
        done = run_cli(command, typo)
        assert done.returncode == 2, (flag, done.stderr)
        last = done.stderr.strip().splitlines()[-1]
        assert last.startswith(f"composo {command}: error: no flag {typo!r}"), done.stderr
        assert f"did you mean {flag!r}?" in last, (flag, last)
        assert f"usage: composo {command}" in done.stderr  # the command's usage, not the top's


def test_the_issue_s_typo_names_local_and_sends_nothing(
    live: ServerProcess, tmp_path: Path
) -> None:
    data = tmp_path / "data.jsonl"
    data.write_text(json.dumps({"question": GOOD_Q, "answer": GOOD_A}) + "\n")
    done = run_cli("evaluate", data, "-c", CRITERION, "--locl")
    assert done.returncode == 2
    assert "no flag '--locl'; did you mean '--local'?" in done.stderr
    assert "unrecognized arguments" not in done.stderr
    top = run_cli("--verison")
    assert top.returncode == 2 and "did you mean '--version'?" in top.stderr
    assert live.requests() == []


def test_a_missing_column_is_named_with_the_cli_s_flags_and_the_file_s_columns(
    live: ServerProcess, tmp_path: Path
) -> None:
    data = _csv(tmp_path / "d.csv", ["prompt", "model_output", "notes"], [[GOOD_Q, GOOD_A, ""]])
    done = _evaluate(live, data)
    assert done.returncode == 2
    message = done.stderr
    assert "no 'messages' column and no 'question' or 'answer' column" in message
    assert "'prompt', 'model_output', 'notes'" in message
    assert "--question-column prompt --answer-column model_output" in message
    assert "columns=" not in message and "{" not in message

    unlike = _csv(tmp_path / "u.csv", ["a", "b"], [[GOOD_Q, GOOD_A]])
    vague = _evaluate(live, unlike)
    assert vague.returncode == 2
    assert "--question-column NAME --answer-column NAME" in vague.stderr
    assert "prompt" not in vague.stderr  # never a column the file does not have

    typo = _evaluate(live, data, "--question-column", "promtp", "--answer-column", "model_output")
    assert typo.returncode == 2
    assert "--question-column promtp is not a column of this table" in typo.stderr
    assert "did you mean --question-column prompt?" in typo.stderr
    assert live.requests() == []


def test_csv_error_rows_carry_the_id_and_the_file_s_line(
    live: ServerProcess, tmp_path: Path
) -> None:
    data = _csv(
        tmp_path / "d.csv",
        ["ticket", "question", "answer"],
        [
            ["T-1", GOOD_Q, GOOD_A],  # line 2
            ["T-2", "A question\nover two lines", ""],  # lines 3-4: the empty answer
            ["T-3", GOOD_Q, GOOD_A, "extra cell"],  # line 5: one cell too many
            ["T-4", GOOD_Q, GOOD_A],  # line 6
        ],
    )
    out = tmp_path / "out.jsonl"
    done = _evaluate(live, data, "--id-column", "ticket", "-o", out)
    assert done.returncode == 1
    rows = {r["id"]: r for r in read_rows(out)}
    assert set(rows) == {"T-1", "T-2", "T-3", "T-4"}
    assert rows["T-1"]["error"] is None and rows["T-4"]["error"] is None
    assert (
        "line 3, column 'answer' (--answer-column): expected text, got an empty cell"
        in rows["T-2"]["error"]
    )
    assert "line 5: 4 cells where the header has 3 columns" in rows["T-3"]["error"]
    assert "line 3, column 'answer'" in done.stderr and "line 5:" in done.stderr
    assert len(live.requests()) == 2


def test_a_row_the_server_refuses_is_reported_by_its_line_and_id(
    live: ServerProcess, tmp_path: Path
) -> None:
    data = _csv(
        tmp_path / "d.csv",
        ["id", "question", "answer", "system"],
        [["a", GOOD_Q, GOOD_A, ""], ["b", GOOD_Q, GOOD_A, "x" * 100]],
    )
    live.fault({"status": 422, "detail": "refused for the test"})
    out = tmp_path / "out.jsonl"
    done = _evaluate(live, data, "-o", out, "--concurrency", "1")
    failed = [r for r in read_rows(out) if r["error"]]
    assert len(failed) == 1
    line = {"a": 2, "b": 3}[failed[0]["id"]]
    assert f"line {line} (id {failed[0]['id']}):" in done.stderr


def test_parquet_error_rows_carry_the_id_and_the_row(live: ServerProcess, tmp_path: Path) -> None:
    table = pa.table(
        {
            "key": ["p1", "p2", "p3"],
            "question": [GOOD_Q, GOOD_Q, GOOD_Q],
            "answer": [GOOD_A, None, GOOD_A],
        }
    )
    data = tmp_path / "d.parquet"
    pq.write_table(table, data)
    out = tmp_path / "out.jsonl"
    done = _evaluate(live, data, "--id-column", "key", "-o", out)
    assert done.returncode == 1
    rows = {r["id"]: r for r in read_rows(out)}
    assert "row 2, column 'answer' (--answer-column): expected text" in rows["p2"]["error"]
    assert rows["p1"]["error"] is None and rows["p3"]["error"] is None


def test_jsonl_rows_mapped_by_column_carry_their_id(live: ServerProcess, tmp_path: Path) -> None:
    data = tmp_path / "d.jsonl"
    data.write_text(
        json.dumps({"ref": "j1", "question": GOOD_Q, "answer": GOOD_A})
        + "\n\n"
        + json.dumps({"ref": "j2", "question": GOOD_Q, "answer": 7})
        + "\n"
    )
    out = tmp_path / "out.jsonl"
    done = _evaluate(live, data, "--id-column", "ref", "-o", out)
    assert done.returncode == 1
    rows = {r["id"]: r for r in read_rows(out)}
    says = "line 3, column 'answer' (--answer-column): expected text, got an int"
    assert says in rows["j2"]["error"] and says in done.stderr


@pytest.mark.parametrize("answer", ["", "   "])
def test_a_blank_answer_fails_its_row_naming_the_column_and_its_flag(
    live: ServerProcess, tmp_path: Path, answer: str
) -> None:
    data = tmp_path / "d.jsonl"
    rows_in = [{"question": GOOD_Q, "reply": GOOD_A}, {"question": GOOD_Q, "reply": answer}]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows_in))
    out = tmp_path / "out.jsonl"
    done = _evaluate(live, data, "--answer-column", "reply", "-o", out)
    assert done.returncode == 1
    blank = {r["index"]: r for r in read_rows(out)}[1]
    says = "line 2, column 'reply' (--answer-column): expected text, got "
    assert blank["score"] is None and blank["error"].startswith("ComposoValidationError: " + says)
    assert says in done.stderr
    assert len(live.requests()) == 1  # only the row with an answer was sent


# What a command shares with another command's module: `view` shows `report`'s page, and
# `agreement` draws `compare`'s bootstrap intervals.
SHARED = {"view": {"composo.cli._report"}, "agreement": {"composo.cli._compare"}}


@pytest.mark.parametrize("command", list(SUBCOMMANDS))
def test_a_command_loads_only_its_own_module(command: str) -> None:
    """A command builds its parser without importing the other subcommands (a fresh
    interpreter: the test process has imported them all)."""
    import subprocess
    import sys

    code = (
        "import sys\nfrom composo.cli import SUBCOMMANDS, main\n"
        f"try:\n    main([{command!r}, '--help'])\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m, _ in SUBCOMMANDS.values() if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    own = SUBCOMMANDS[command][0]
    assert out.strip().splitlines()[-1] == str(sorted({own, *SHARED.get(command, ())}))


# -- one voice: help pages, exit statuses, the documented summary -------------------------------

CLI_DOC = Path(__file__).resolve().parents[1] / "docs" / "cli.md"


@pytest.mark.parametrize("command", list(SUBCOMMANDS))
def test_every_help_page_names_its_values_alike_and_ends_with_the_exit_statuses(
    command: str,
) -> None:
    done = run_cli(command, "--help")
    assert done.returncode == 0
    usage = done.stdout.split("\n\n", 1)[0]
    # each value is named by a metavar (N, SECONDS, FILE...), never argparse's own placeholder,
    # the flag's name upper-cased (MAX_BODY_BYTES)
    for flag, value in re.findall(r"(--[\w-]+) ([A-Z][\w./=-]*)", usage):
        assert value != flag[2:].upper().replace("-", "_"), f"{command} {flag} {value}"
    assert not re.search(r"\[[a-z]+\]|(?<= )[a-z_]+$", usage, re.M), usage  # positionals too
    flat = " ".join(done.stdout.split())
    assert flat.endswith("130 interrupted (docs/cli.md, 'Exit statuses')")


def test_serve_help_says_that_without_keys_any_key_is_accepted() -> None:
    flat = " ".join(run_cli("serve", "--help").stdout.split())
    assert "or COMPOSO_SERVER_API_KEYS (comma-separated), ANY key is accepted" in flat


def test_the_exit_statuses_are_documented_in_one_table_as_help_lists_them() -> None:
    text = CLI_DOC.read_text(encoding="utf-8")
    section = text.split("## Exit statuses", 1)[1].split("\n## ", 1)[0]
    documented = re.findall(r"^\| (\d+) \|", section, re.M)
    flat = " ".join(run_cli("evaluate", "--help").stdout.split())
    listed = re.findall(r"(\d+) [a-z]", flat.split("exit status:", 1)[1])
    assert documented == listed == ["0", "1", "2", "3", "4", "5", "130"]


def test_the_documented_summary_is_what_the_documented_run_prints(tmp_path: Path) -> None:
    """docs/cli.md's sample summary, word for word, numbers aside (the stand-in judge's scores
    may move): the command above it is run as written."""
    text = CLI_DOC.read_text(encoding="utf-8").split("## The summary", 1)[1]
    found = re.search(r"```bash\n(.*?)```\n\nends with:\n\n```text\n(.*?)```", text, re.S)
    assert found is not None
    command = shlex.split(found.group(1).replace("\\\n", " "))
    assert command[:2] == ["composo", "evaluate"] and "--local" in command
    (tmp_path / "examples").symlink_to(CLI_DOC.parents[1] / "examples")
    done = run_cli(*command[1:], cwd=tmp_path)
    assert done.returncode == 0, done.stderr

    def words(screen: str) -> list[str]:
        shown = re.sub(r"[\u2500-\u257f]", " ", screen)  # the table's rules
        return re.sub(r"\d+(\.\d+)?", "#", shown).split()

    assert words(done.stderr) == words(found.group(2))
