"""`composo view` as a web server, without a browser: where it listens, the headers it sends,
and the reviews it refuses (wrong type, another origin, another host name, values out of range,
too large), none of which reaches the reviews file."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from composo.cli._report import conversation
from tests.support.browser import Viewer, start_view
from tests.support.cli import page_data, run_composo
from tests.test_view import BINARY, SCORED, write_run


@pytest.fixture
def viewer(tmp_path: Path) -> Iterator[tuple[Viewer, Path]]:
    out = write_run(tmp_path, "out.jsonl")
    running = start_view(out)
    try:
        yield running, out
    finally:
        running.stop()


def review(viewer: Viewer, body: object, **headers: str) -> httpx.Response:
    sent = {"Content-Type": "application/json", **headers}
    return httpx.post(viewer.url + "api/review", content=json.dumps(body), headers=sent)


def test_it_listens_on_loopback_and_locks_its_page_down(viewer: tuple[Viewer, Path]) -> None:
    running, _ = viewer
    assert running.url.startswith("http://127.0.0.1:")
    page = httpx.get(running.url)
    assert page.status_code == 200
    policy = page.headers["content-security-policy"]
    # only the page's own script (by its hash) runs; it may fetch from the viewer alone
    assert "default-src 'none'" in policy and "script-src 'sha256-" in policy
    assert "connect-src 'self'" in policy and "frame-ancestors 'none'" in policy
    assert page.headers["x-content-type-options"] == "nosniff"
    assert page_data(page.text)["mode"] == "view"  # the report's page, served
    for path in ("out.jsonl", "static/../out.jsonl", "out.jsonl.run.json"):
        assert httpx.get(running.url + path).status_code == 404  # no file is served
    # a name that resolves here but is not the viewer's (DNS rebinding) gets nothing
    assert httpx.get(running.url, headers={"Host": "evil.example"}).status_code == 400


def test_bad_reviews_are_refused_and_nothing_is_written(viewer: tuple[Viewer, Path]) -> None:
    running, out = viewer
    good = {"run": 0, "id": "item-03", "criterion": SCORED, "verdict": "agree", "comment": ""}
    cases = [
        (httpx.post(running.url + "api/review", content=json.dumps(good)), 415, "application/json"),
        (review(running, good, Origin="http://evil.example"), 403, "own page"),
        (review(running, {**good, "score": 1.5}), 400, "score 1.5"),
        (review(running, {**good, "score": True}), 400, "score True"),
        (review(running, {**good, "verdict": "maybe"}), 400, "verdict 'maybe'"),
        (review(running, {**good, "id": "nope"}), 400, "id 'nope'"),
        (review(running, {**good, "run": 3}), 400, "run 3"),
        (review(running, {**good, "comment": "x" * 5000}), 400, "comment"),
        (review(running, {**good, "comment": "x" * 70_000}), 413, "64 KiB"),
        (review(running, [1, 2]), 400, "JSON object"),
    ]
    for answer, status, said in cases:
        assert answer.status_code == status, (said, answer.text)
        assert said in answer.json()["detail"]
    raw = httpx.post(
        running.url + "api/review",
        content=b'{"run": 0, "id": "item-03", "criterion": "x", "score": NaN}',
        headers={"Content-Type": "application/json"},
    )
    assert raw.status_code == 400
    assert not out.with_name("out.jsonl.reviews.jsonl").exists()


def test_a_review_is_kept_as_written(viewer: tuple[Viewer, Path]) -> None:
    running, out = viewer
    hostile = "</script><script>alert(1)</script> & \u2028 done"
    answer = review(
        running,
        {"run": 0, "id": "item-04", "criterion": BINARY, "verdict": "disagree", "comment": hostile},
    )
    assert answer.status_code == 200, answer.text
    saved = json.loads(out.with_name("out.jsonl.reviews.jsonl").read_text())
    assert saved["comment"] == hostile and saved["label"] == 1.0  # the judge said 0
    page = httpx.get(running.url).text
    assert "</script><script>alert" not in page  # the data element cannot be closed early
    data = page.split('id="composo-data">', 1)[1].split("</script>", 1)[0]
    assert json.loads(data)["reviews"][0]["item-04"][BINARY]["comment"] == hostile


def test_view_of_a_missing_or_empty_file_is_a_usage_error(tmp_path: Path) -> None:
    done = run_composo("view", tmp_path / "missing.jsonl")
    assert done.returncode == 2 and "no such file" in done.stderr
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    done = run_composo("view", empty)
    assert done.returncode == 2 and "holds no result rows" in done.stderr


def test_a_trace_shows_as_its_agent_tree() -> None:
    record = {
        "trace": {
            "root_agent_instance_id": "root",
            "agent_instance_by_id": {
                "root": {
                    "id": "root",
                    "name": "planner",
                    "interactions": [
                        {
                            "input_messages": [{"role": "user", "content": "plan a refund"}],
                            "output_messages": [
                                {"content": {"id": "c", "name": "lookup", "parameters": "{}"}}
                            ],
                        },
                        "child",
                    ],
                },
                "child": {"id": "child", "name": "writer", "interactions": ["root"]},
            },
        }
    }
    tree = conversation(record)
    assert tree is not None
    root = tree["trace"]
    assert root["name"] == "planner" and root["steps"][0]["output"][0]["calls"][0]["name"] == (
        "lookup"
    )
    child = root["children"][0]
    assert child["name"] == "writer"
    assert child["children"][0]["name"] == "(missing agent)"  # a cycle is cut, not followed


def test_items_sharing_an_id_stay_apart(tmp_path: Path) -> None:
    from composo.cli._report import load_run, page_data
    from tests.support.cli import write_rows

    rows = [
        {
            "index": i,
            "id": "same",
            "criterion": SCORED,
            "score": 0.5,
            "explanation": "",
            "error": None,
        }
        for i in range(3)
    ]
    data = page_data([load_run(write_rows(tmp_path / "out.jsonl", rows))], mode="view", title="")

    assert [i["key"] for i in data["items"]] == ["line 1", "line 2", "line 3"]


def test_rows_set_aside_are_listed_for_the_page(tmp_path: Path) -> None:
    from composo.cli._report import load_run, page_data

    out = write_run(tmp_path, "out.jsonl")
    with out.open("a") as f:
        f.write('{"index": 40, "id": "x", "criterion": "Reward y", "score": Infinity}\n')
    data = page_data([load_run(out)], mode="view", title="")

    run = data["runs"][0]
    assert run["set_aside"] == 1 and run["problems"][0]["line"] == 61
    assert "score inf" in run["problems"][0]["problem"]
    assert all(i["key"] != "x" for i in data["items"])


def test_changes_name_items_as_the_table_does(tmp_path: Path) -> None:
    from composo.cli._report import load_run, page_data
    from tests.support.cli import write_rows

    def rows(score: float, with_ids: bool) -> list[dict[str, object]]:
        return [
            {
                "index": i,
                "id": f"q{i}" if with_ids or i else None,  # one row without an id: pair by line
                "criterion": SCORED,
                "score": score if i == 1 else 0.5,
                "explanation": "",
                "error": None,
            }
            for i in range(3)
        ]

    base = load_run(write_rows(tmp_path / "a.jsonl", rows(0.2, True)))
    new = load_run(write_rows(tmp_path / "b.jsonl", rows(0.9, False)))
    data = page_data([base, new], mode="view", title="")

    (change,) = data["changes"][0]["changed"]
    assert data["changes"][0]["paired_by"] == "line" and change["key"] == "q1"
    assert change["key"] in {i["key"] for i in data["items"]}
