"""The one page of `composo view` and `composo report` in a real browser (Debian's Chromium,
driven by Playwright): the run's criteria, lowest scores, errors and rows set aside, the first page
of items, search, an item's conversation with its tool calls and the judge's explanation, links to
an item, hostile strings that stay text and run nothing, two runs compared, a review that outlives
a restart and counts in `composo agreement`, and the report from file://. Every page is watched
for console errors and for requests leaving the machine."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.support.browser import CHROMIUM, Watched, chromium, start_view, watched_page
from tests.support.cli import read_rows, run_composo, write_rows

pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(),
    reason="needs Debian's Chromium at /usr/bin/chromium (apt-get install chromium; CI has it)",
)

SCORED = "Reward answers that explain the refund policy"
BINARY = "Passes if the answer mentions the return window"
HOSTILE = '<script>window.__pwned=1</script><img src=x onerror="window.__pwned=2">'
ITEMS = 30


def dataset_line(i: int) -> dict[str, Any]:
    answer = (
        f"Returns within 30 days get a refund. {HOSTILE}" if i == 5 else f"Answer {i}: 30 days."
    )
    return {
        "id": f"item-{i:02d}",
        "messages": [
            {"role": "system", "content": "You are the refunds desk."},
            {"role": "user", "content": f"Question {i}: can I return order {i}?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"call-{i}",
                        "type": "function",
                        "function": {"name": "lookup_order", "arguments": json.dumps({"order": i})},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": f"call-{i}", "content": f"order {i}: delivered"},
            {"role": "assistant", "content": answer},
        ],
        "tags": {
            "expected": "good" if i % 2 else "flawed",
            **({"note": HOSTILE} if i == 5 else {}),
        },
    }


def result_rows(shift: dict[int, float] | None = None) -> list[dict[str, Any]]:
    rows = []
    for i in range(ITEMS):
        score = round(0.2 + (i % 10) / 20 + (shift or {}).get(i, 0.0), 3)
        explanation = f"explained the policy for {i}"
        if i == 5:
            explanation += " " + HOSTILE
        for criterion, value in ((SCORED, score), (BINARY, float(i % 2))):
            rows.append(
                {
                    "index": i,
                    "id": f"item-{i:02d}",
                    "criterion": criterion,
                    "score": value,
                    "explanation": explanation,
                    "error": None,
                }
            )
    return rows


def write_run(folder: Path, name: str, shift: dict[int, float] | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    data = folder / "data.jsonl"
    data.write_text("".join(json.dumps(dataset_line(i)) + "\n" for i in range(ITEMS)))
    out = write_rows(folder / name, result_rows(shift))
    record = {"judge": "heuristic", "local": True, "criteria": [SCORED, BINARY], "input": str(data)}
    (folder / (name + ".run.json")).write_text(json.dumps(record))
    return out


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium() as b:
        yield b


@pytest.fixture
def page(browser: Any) -> Iterator[Watched]:
    with watched_page(browser) as watched:
        yield watched
        assert watched.errors == [], watched.errors
        assert watched.outside == [], watched.outside


def visible_ids(page: Any) -> list[str]:
    return [str(t) for t in page.locator("#cv-items a.cv-id").all_text_contents()]


def check_search_and_item(page: Any) -> None:
    """The checks the viewer and the static report share."""
    page.wait_for_selector("#cv-items a.cv-id")
    assert len(visible_ids(page)) >= 10  # the first page
    page.fill("input[type=search]", "item-17")
    expect(page.locator("#cv-items a.cv-id")).to_have_count(1)
    assert visible_ids(page) == ["item-17"]
    assert "1 of 30 item(s)" in page.text_content("#cv-count")
    page.click("#cv-items a.cv-id")
    panel = page.locator("#cv-item")
    expect(panel).to_contain_text("Question 17")  # the viewer sends it when the item opens
    text = panel.text_content() or ""
    assert "Question 17: can I return order 17?" in text and "You are the refunds desk." in text
    assert "lookup_order" in text and '{"order": 17}' in text  # the tool call, name and arguments
    assert "order 17: delivered" in text  # the tool's result
    assert "explained the policy for 17" in text  # the judge's explanation
    page.fill("input[type=search]", "")


def check_hostile_item_is_inert(page: Any) -> None:
    page.fill("input[type=search]", "item-05")
    expect(page.locator("#cv-items a.cv-id")).to_have_count(1)
    page.click("#cv-items a.cv-id")
    page.locator("#cv-item").wait_for(state="visible")
    expect(page.locator("#cv-item")).to_contain_text("30 days")
    assert HOSTILE in (page.text_content("#cv-item") or "")  # shown as the text it is
    page.wait_for_timeout(200)  # an image's error handler would have run by now
    assert page.evaluate("window.__pwned") is None
    assert (
        page.locator("#cv-item img").count() == 0 and page.locator("#cv-item script").count() == 0
    )


def test_view_lists_searches_and_opens_items(tmp_path: Path, page: Watched) -> None:
    out = write_run(tmp_path, "out.jsonl")
    with out.open("a") as f:  # a row that is not a result, with a hostile id: listed as text
        f.write(json.dumps({"index": 99, "id": HOSTILE, "criterion": SCORED, "score": 7}) + "\n")
    viewer = start_view(out)
    try:
        page.page.goto(viewer.url)
        expect(page.page.locator(".cv-problems")).to_contain_text(HOSTILE)
        expect(page.page.locator(".cv-problems")).to_contain_text("score 7 is not a number")
        check_search_and_item(page.page)
        body = page.page.text_content("#composo-app") or ""
        assert "heuristic" in body and "Run: out.jsonl" in body  # the judge, from the run record
        assert "By tag" in body and "flawed" in body
        check_hostile_item_is_inert(page.page)
    finally:
        viewer.stop()


def test_view_filters_and_sorts(tmp_path: Path, page: Watched) -> None:
    out = write_run(tmp_path, "out.jsonl")
    viewer = start_view(out)
    try:
        p = page.page
        p.goto(viewer.url)
        p.wait_for_selector("#cv-items a.cv-id")
        p.select_option("#cv-criterion", "0")
        p.fill("#cv-min", "0.6")
        # scores 0.2 + (i % 10) / 20: at least 0.6 for i % 10 in 8, 9 -> 6 items
        expect(p.locator("#cv-items a.cv-id")).to_have_count(6)
        p.fill("#cv-min", "")
        p.select_option("#cv-criterion", "1")
        p.select_option("#cv-status", "fail")
        expect(p.locator("#cv-items a.cv-id")).to_have_count(15)
        p.select_option("#cv-status", "")
        p.select_option("#cv-criterion", "")
        p.select_option("#cv-tag", "expected=good")
        expect(p.locator("#cv-items a.cv-id")).to_have_count(15)
        p.select_option("#cv-tag", "")
        p.click("button[data-sort='0']")
        p.click("button[data-sort='0']")  # highest first
        first = visible_ids(p)[0]
        assert first in {f"item-{i:02d}" for i in (9, 19, 29)}
        p.select_option("#cv-size", "50")
        expect(p.locator("#cv-items a.cv-id")).to_have_count(30)
    finally:
        viewer.stop()


def test_view_of_two_runs_shows_every_change_signed(tmp_path: Path, page: Watched) -> None:
    base = write_run(tmp_path, "base.jsonl")
    shift = {3: 0.1, 8: -0.3, 14: 0.05, 21: -0.15}
    new = write_run(tmp_path, "new.jsonl", shift)
    viewer = start_view(base, new)
    try:
        page.page.goto(viewer.url)
        page.page.wait_for_selector(".cv-change")
        rows = page.page.locator(".cv-change").all_text_contents()
        assert len(rows) == len(shift)
        # most regressed first, each with its signed difference
        assert rows[0].startswith("item-08") and rows[0].endswith("-0.300")
        assert rows[1].startswith("item-21") and rows[1].endswith("-0.150")
        assert any(r.startswith("item-03") and r.endswith("+0.100") for r in rows)
        assert any(r.startswith("item-14") and r.endswith("+0.050") for r in rows)
        summary = page.page.text_content(".cv-summary") or ""
        assert "improved" in summary and "2" in summary
        # the table and reviews follow the run picked: a review of run 2 goes beside run 2
        p = page.page
        p.select_option("#cv-run", "1")
        p.fill("input[type=search]", "item-08")
        expect(p.locator("#cv-items a.cv-id")).to_have_count(1)
        p.click("#cv-items a.cv-id")
        form = p.locator("#cv-item .cv-review").first
        form.locator(".cv-verdict").select_option("agree")
        form.locator(".cv-save").click()
        expect(form.locator(".cv-saved")).to_have_text("saved")
    finally:
        viewer.stop()
    saved = json.loads(new.with_name("new.jsonl.reviews.jsonl").read_text())
    assert saved["id"] == "item-08" and saved["label"] == pytest.approx(0.3)  # 0.6 - 0.3
    assert not base.with_name("base.jsonl.reviews.jsonl").exists()


def test_a_review_outlives_a_restart_and_counts_in_agreement(tmp_path: Path, page: Watched) -> None:
    out = write_run(tmp_path, "out.jsonl")
    p = page.page
    viewer = start_view(out)
    try:
        p.goto(viewer.url)
        p.fill("input[type=search]", "item-17")
        expect(p.locator("#cv-items a.cv-id")).to_have_count(1)
        p.click("#cv-items a.cv-id")
        form = p.locator("#cv-item .cv-review").first  # the scored criterion comes first
        form.locator(".cv-own").fill("0.2")
        form.locator(".cv-comment").fill("too generous: <b>no</b> window given")
        form.locator(".cv-save").click()
        form.locator(".cv-saved", has_text="saved").wait_for()
        assert (form.locator(".cv-saved").text_content() or "") == "saved"
    finally:
        viewer.stop()
    reviews = out.with_name("out.jsonl.reviews.jsonl")
    assert reviews.is_file() and json.loads(reviews.read_text())["label"] == 0.2
    assert "reviews" not in out.read_text()  # the results file is untouched

    viewer = start_view(out)
    try:
        p.goto(viewer.url)
        p.fill("input[type=search]", "item-17")
        expect(p.locator("#cv-items a.cv-id")).to_have_count(1)
        p.click("#cv-items a.cv-id")
        form = p.locator("#cv-item .cv-review").first
        assert form.locator(".cv-own").input_value() == "0.2"
        assert form.locator(".cv-comment").input_value() == "too generous: <b>no</b> window given"
    finally:
        viewer.stop()

    done = run_composo("agreement", out, "--labels", reviews)
    assert done.returncode == 0, done.stderr
    assert "(reward, n=1)" in done.stdout and "item-17: judge 0.550, human 0.200" in done.stdout


def test_report_searches_and_opens_items_from_file(tmp_path: Path, page: Watched) -> None:
    out = write_run(tmp_path, "out.jsonl")
    report = tmp_path / "report.html"
    done = run_composo("report", out, "-o", report, "--title", HOSTILE)
    assert done.returncode == 0, done.stderr

    p = page.page
    p.goto(report.as_uri())
    assert p.text_content("h1") == HOSTILE and p.title() == HOSTILE  # the title, as text
    check_search_and_item(p)
    check_hostile_item_is_inert(p)
    assert p.get_attribute("link[rel=icon]", "href").startswith("data:image/svg+xml,")
    # an item's link opens it, from a fresh load too
    p.goto(report.as_uri() + "#item=item-17")
    expect(p.locator("#cv-item")).to_contain_text("Question 17: can I return order 17?")
    p.click("#cv-item .cv-close")
    expect(p.locator("#cv-item")).to_be_hidden()


def test_report_shows_criteria_lowest_scores_errors_and_rows_set_aside(
    tmp_path: Path, page: Watched
) -> None:
    out = write_run(tmp_path, "out.jsonl")
    rows = read_rows(out)
    rows[0]["explanation"] = "too short " * 40 + "END-OF-EXPLANATION"  # item-00, lowest of SCORED
    rows[0]["judge"] = "openai"  # a second judge for SCORED: its lowest scores name theirs
    never = "Reward tool calls with correct arguments"
    rows += [dict(rows[2 * i], criterion=never, score=None) for i in range(3)]
    rows.append(dict(rows[6], criterion=never, score=None, error=HOSTILE))
    rows.append({"index": 99, "id": HOSTILE, "criterion": SCORED, "score": 7})
    write_rows(out, rows)
    report = tmp_path / "report.html"
    done = run_composo("report", out, "--lowest", "3", "-o", report)
    assert done.returncode == 4, done.stderr  # the row set aside

    p = page.page
    p.goto(report.as_uri())
    run = p.locator("#cv-run-0")
    expect(run).to_contain_text("heuristic, the offline development stand-in")
    cells = p.locator(".cv-criteria tr", has_text="tool calls with correct").locator("td")
    # nothing scored: no mean ("no data"), 3 not applicable, 1 error
    assert cells.nth(1).text_content() == "no data"
    assert [cells.nth(i).text_content() for i in (5, 6, 7)] == ["0", "3", "1"]
    assert "pass 50%" in (p.text_content(".cv-criteria") or "")  # the binary criterion
    lowest = p.locator(".cv-lowest")
    expect(lowest).to_have_count(2)  # the two criteria with scores
    first = lowest.first.locator("tr").first
    assert (first.text_content() or "").startswith("item-000.20")
    expect(first).to_contain_text("Question 0: can I return order 0?")  # question and answer
    assert (first.locator("td").nth(1).text_content() or "") == "0.20openai"
    assert "END-OF-EXPLANATION" not in (first.inner_text() or "")  # folded...
    first.locator("summary", has_text="full explanation").click()
    expect(first).to_contain_text("END-OF-EXPLANATION")  # ...until opened
    expect(p.locator(".cv-errors")).to_contain_text(HOSTILE)  # the error, as text
    expect(p.locator(".cv-problems")).to_contain_text(HOSTILE)
    expect(run).to_contain_text("1 row(s) of the results file are not results")
    assert "By tag" in (run.text_content() or "")
    assert p.evaluate("window.__pwned") is None
    assert p.locator("#composo-app img, #composo-app script").count() == 0


def test_a_trace_item_shows_its_agent_tree(tmp_path: Path, page: Watched) -> None:
    trace = {
        "root_agent_instance_id": "a1",
        "agent_instance_by_id": {
            "a1": {
                "id": "a1",
                "name": "orchestrator",
                "interactions": [
                    {
                        "input_messages": [{"role": "user", "content": "refund order 9"}],
                        "output_messages": [
                            {
                                "type": "tool_call",
                                "content": {
                                    "id": "t1",
                                    "name": "issue_refund",
                                    "parameters": '{"order": 9}',
                                },
                            }
                        ],
                    },
                    "a2",
                ],
            },
            "a2": {
                "id": "a2",
                "name": "notifier",
                "interactions": [
                    {
                        "input_messages": [{"role": "user", "content": "tell the customer"}],
                        "output_messages": [{"content": "Your refund is on its way."}],
                    }
                ],
            },
        },
    }
    data = tmp_path / "traces.jsonl"
    data.write_text(json.dumps({"id": "trace-1", "trace": trace}) + "\n")
    out = write_rows(
        tmp_path / "out.jsonl",
        [
            {
                "index": 0,
                "id": "trace-1",
                "criterion": "Reward agents that finish the task",
                "score": 0.7,
                "explanation": "the refund was issued and the customer told",
                "error": None,
            }
        ],
    )
    viewer = start_view(out, "--data", data)
    try:
        page.page.goto(viewer.url)
        page.page.click("#cv-items a.cv-id")
        panel = page.page.locator("#cv-item")
        expect(panel).to_contain_text("orchestrator (a1)")
        text = panel.text_content() or ""
        assert "notifier (a2)" in text and "Your refund is on its way." in text
        assert "issue_refund" in text and '{"order": 9}' in text
        assert "the refund was issued and the customer told" in text
        # the sub-agent sits inside its caller
        assert page.page.locator(".cv-agent .cv-agent .cv-agent-name").text_content() == (
            "notifier (a2)"
        )
    finally:
        viewer.stop()


def test_static_report_with_a_baseline_shows_the_changes(tmp_path: Path, page: Watched) -> None:
    base = write_run(tmp_path, "base.jsonl")
    new = write_run(tmp_path, "new.jsonl", {3: 0.1, 8: -0.3})
    report = tmp_path / "report.html"
    done = run_composo("report", new, "--baseline", base, "-o", report)
    assert done.returncode == 0, done.stderr

    p = page.page
    p.goto(report.as_uri())
    rows = p.locator(".cv-change").all_text_contents()
    assert len(rows) == 2 and rows[0].startswith("item-08") and rows[0].endswith("-0.300")
    assert p.locator("#cv-run").input_value() == "1"  # the table shows this run, not the baseline
    p.fill("input[type=search]", "item-08")
    expect(p.locator("#cv-items a.cv-id")).to_have_count(1)
    assert "0.30" in (p.text_content("#cv-items tbody") or "")
