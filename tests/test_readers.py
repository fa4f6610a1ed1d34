"""`composo evaluate` on real CSV and Parquet files, with the column mapping as flags."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from composo._data.readers import BadRow, open_records
from tests.support.cli import read_rows, run_composo
from tests.support.servers import ServerProcess

REFUND = "Reward answers that explain the refund policy"
QUESTIONS = [f"Question {i}: how do refunds work for returns?" for i in range(5)]
ANSWERS = ["Returns within 30 days get a full refund. " * (1 + i % 3) for i in range(5)]


def evaluate(live: ServerProcess, *args: object) -> object:
    return run_composo(
        "evaluate", *args, "-c", REFUND, "--base-url", live.base_url, "--api-key", live.api_key,
        "--no-cache",
    )  # fmt: skip


def write_csv(path: Path, header: list[str], rows: list[list[str]]) -> Path:
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows(rows)
    return path


def scores(path: Path) -> dict[int, float]:
    return {r["index"]: r["score"] for r in read_rows(path)}


def test_csv_with_mapped_columns_scores_like_the_same_jsonl(
    live: ServerProcess, tmp_path: Path
) -> None:
    data = write_csv(
        tmp_path / "logs.csv",
        ["ticket", "prompt", "reply"],
        [[f"t{i}", QUESTIONS[i], ANSWERS[i]] for i in range(5)],
    )
    out = tmp_path / "out.jsonl"
    done = evaluate(
        live, data, "-o", out, "--id-column", "ticket", "--question-column", "prompt",
        "--answer-column", "reply",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    rows = sorted(read_rows(out), key=lambda r: r["index"])
    assert [r["id"] for r in rows] == [f"t{i}" for i in range(5)]
    assert all(r["error"] is None for r in rows)

    jsonl = tmp_path / "same.jsonl"
    jsonl.write_text(
        "".join(
            json.dumps(
                {
                    "messages": [
                        {"role": "user", "content": QUESTIONS[i]},
                        {"role": "assistant", "content": ANSWERS[i]},
                    ]
                }
            )
            + "\n"
            for i in range(5)
        )
    )
    assert evaluate(live, jsonl, "-o", tmp_path / "same-out.jsonl").returncode == 0
    assert scores(out) == scores(tmp_path / "same-out.jsonl")


def test_parquet_in_and_parquet_out(live: ServerProcess, tmp_path: Path) -> None:
    messages = [
        [{"role": "user", "content": QUESTIONS[i]}, {"role": "assistant", "content": ANSWERS[i]}]
        for i in range(5)
    ]
    table = pa.table({"id": list(range(5)), "messages": messages})
    pq.write_table(table, tmp_path / "data.parquet")
    out = tmp_path / "results.parquet"
    done = evaluate(live, tmp_path / "data.parquet", "-o", out)
    assert done.returncode == 0, done.stderr
    written = pq.read_table(out).to_pylist()
    assert sorted(r["id"] for r in written) == [str(i) for i in range(5)]
    assert set(written[0]) == {"index", "id", "criterion", "score", "explanation", "error"} | {
        "judge",
        "judge_model",
        "model_core",
        "source",
        "metadata",
    }
    assert {r["judge"] for r in written} == {"heuristic"}
    assert all(isinstance(r["score"], float) and r["error"] is None for r in written)
    assert len(live.requests()) == 5
    assert evaluate(live, tmp_path / "data.parquet", "-o", tmp_path / "same.jsonl").returncode == 0
    assert set(written[0]) == set(read_rows(tmp_path / "same.jsonl")[0])  # no column dropped


def test_a_metadata_column_comes_back_on_each_row(live: ServerProcess, tmp_path: Path) -> None:
    meta = [{"ticket": f"t{i}", "channel": ["email"]} for i in range(3)]
    data = write_csv(
        tmp_path / "d.csv",
        ["question", "answer", "extra"],
        [
            [QUESTIONS[0], ANSWERS[0], json.dumps(meta[0])],
            [QUESTIONS[1], "", json.dumps(meta[1])],  # a bad row keeps its metadata
            [QUESTIONS[2], ANSWERS[2], ""],
        ],
    )
    out = tmp_path / "out.jsonl"
    done = evaluate(live, data, "-o", out, "--metadata-column", "extra")
    assert done.returncode == 1, done.stderr
    rows = {r["index"]: r for r in read_rows(out)}
    assert [rows[i]["metadata"] for i in range(3)] == [meta[0], meta[1], None]
    assert rows[1]["error"] is not None and rows[0]["error"] is None
    assert not any("ticket" in json.dumps(r["body"]) for r in live.requests())

    header = ["question", "answer", "metadata"]
    not_json = write_csv(tmp_path / "e.csv", header, [[QUESTIONS[0], ANSWERS[0], "vip"]])
    failed = evaluate(live, not_json, "-o", tmp_path / "e.jsonl")
    assert "line 2, column 'metadata' (--metadata-column): not valid JSON" in failed.stderr

    # Parquet in (a struct column) and out (its JSON text: keys vary from row to row)
    messages = [
        [{"role": "user", "content": QUESTIONS[i]}, {"role": "assistant", "content": ANSWERS[i]}]
        for i in range(2)
    ]
    table = pa.table({"messages": messages, "metadata": [meta[0], None]})
    pq.write_table(table, tmp_path / "d.parquet")
    done = evaluate(live, tmp_path / "d.parquet", "-o", tmp_path / "out.parquet")
    assert done.returncode == 0, done.stderr
    written = {
        r["index"]: r["metadata"] for r in pq.read_table(tmp_path / "out.parquet").to_pylist()
    }
    assert written == {0: json.dumps(meta[0]), 1: None}


def test_format_flag_overrides_the_extension(live: ServerProcess, tmp_path: Path) -> None:
    data = write_csv(tmp_path / "export.txt", ["question", "answer"], [[QUESTIONS[0], ANSWERS[0]]])
    unknown = evaluate(live, data)
    assert unknown.returncode == 2 and "--format jsonl|csv|parquet" in unknown.stderr
    done = evaluate(live, data, "--format", "csv", "-o", tmp_path / "o.jsonl")
    assert done.returncode == 0, done.stderr
    assert len(read_rows(tmp_path / "o.jsonl")) == 1


def test_a_missing_column_exits_2_naming_it_before_any_request(
    live: ServerProcess, tmp_path: Path
) -> None:
    data = write_csv(tmp_path / "d.csv", ["prompt", "reply"], [["q", "a"]])
    done = evaluate(live, data, "--question-column", "prompt")
    assert done.returncode == 2
    assert "no 'messages' column and no 'answer' column" in done.stderr
    assert "'prompt', 'reply'" in done.stderr
    misnamed = evaluate(live, data, "--question-column", "promt", "--answer-column", "reply")
    assert misnamed.returncode == 2
    assert "--question-column promt is not a column of this table" in misnamed.stderr
    assert "did you mean --question-column prompt?" in misnamed.stderr
    assert "columns=" not in done.stderr + misnamed.stderr
    assert live.requests() == []


def test_a_bad_cell_fails_its_row_and_the_others_are_scored(
    live: ServerProcess, tmp_path: Path
) -> None:
    data = write_csv(
        tmp_path / "d.csv",
        ["question", "answer"],
        [[QUESTIONS[0], ANSWERS[0]], [QUESTIONS[1], ""], [QUESTIONS[2], ANSWERS[2]]],
    )
    out = tmp_path / "out.jsonl"
    done = evaluate(live, data, "-o", out)
    assert done.returncode == 1
    says = "line 3, column 'answer' (--answer-column): expected text, got an empty cell"
    assert says in done.stderr
    rows = {r["index"]: r for r in read_rows(out)}
    assert rows[1]["error"] == f"ComposoValidationError: {says}; fill it in or drop the row"
    assert rows[0]["error"] is None and rows[2]["error"] is None
    assert len(live.requests()) == 2


def test_an_unreadable_file_is_one_clear_error(live: ServerProcess, tmp_path: Path) -> None:
    junk = tmp_path / "broken.parquet"
    junk.write_bytes(b"not parquet at all")
    done = evaluate(live, junk)
    assert done.returncode == 2 and "broken.parquet is not a readable Parquet file" in done.stderr

    # a CSV that turns unreadable part-way: what came before is scored and kept
    good = [[QUESTIONS[i % 5], ANSWERS[i % 5]] for i in range(150)]  # past the first 8 KB read
    data = write_csv(tmp_path / "d.csv", ["question", "answer"], good)
    with data.open("ab") as f:
        f.write(b"\xff\xfe broken,row\n")
    out = tmp_path / "out.jsonl"
    torn = evaluate(live, data, "-o", out)
    assert torn.returncode == 1 and "cannot read the CSV from line " in torn.stderr
    kept = read_rows(out)
    assert kept and all(r["error"] is None for r in kept)
    assert len(kept) == len(live.requests())  # nothing scored was lost


def test_records_stream_a_parquet_file_in_batches(tmp_path: Path) -> None:
    n = 2000
    pq.write_table(
        pa.table({"question": [f"q{i}" for i in range(n)], "answer": ["a"] * n}),
        tmp_path / "big.parquet",
        row_group_size=500,
    )
    with open_records(tmp_path / "big.parquet") as records:
        assert records.rows == n
        stream = iter(records)
        index, first = next(stream)
        assert index == 0 and not isinstance(first, BadRow)
        assert first["messages"][0] == {"role": "user", "content": "q0"}
        assert sum(1 for _ in stream) == n - 1
