"""What a new user meets first: the local server's judge named in the summary and the report, the
summary's columns, the report's questions, answers and tags (its data, hostile strings included,
and its markup checked with html.parser), did-you-mean, a port in use, and
``LocalServer(record_requests=...)``."""

from __future__ import annotations

import json
import re
import socket
import statistics
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from composo import Composo, criteria
from composo.server import JUDGE_HEADER, LocalServer
from tests.support.cli import ROOT, page_data, read_rows, run_composo
from tests.support.servers import HTTP

DATA = ROOT / "examples" / "data" / "conversations.jsonl"
RESOLVES = "Reward answers that resolve the customer's problem"
HOSTILE = "<script>alert('x')</script> \"quoted\" & <b>bold</b>"


class _Page(HTMLParser):
    """Text, tags and any script elements of a page, as a browser-free parser sees them."""

    def __init__(self) -> None:
        super().__init__()
        self.text: list[str] = []
        self.tags: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def parse(page: str) -> _Page:
    parser = _Page()
    parser.feed(page)
    parser.close()
    return parser


def _dataset(path: Path, answers: list[tuple[str, str, str]]) -> Path:
    """Lines of (question, answer, tag value)."""
    lines = [
        json.dumps(
            {
                "id": f"item-{i}",
                "messages": [
                    {"role": "user", "content": q},
                    {"role": "assistant", "content": a},
                ],
                "tags": {"expected": tag},
            }
        )
        for i, (q, a, tag) in enumerate(answers)
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


# -- LocalServer(record_requests=...) and the judge header ------------------------------------


def _evaluate(srv: LocalServer, answer: str = "Hold the reset button for ten seconds.") -> None:
    with Composo(api_key=srv.api_key, base_url=srv.base_url) as client:
        client.evaluate(
            messages=[
                {"role": "user", "content": "How do I reset the router?"},
                {"role": "assistant", "content": answer},
            ],
            criteria="Reward answers that explain the reset",
        )


def test_requests_are_not_recorded_unless_asked() -> None:
    with LocalServer() as srv:
        _evaluate(srv)
        with pytest.raises(RuntimeError, match="record_requests=True"):
            srv.requests  # noqa: B018


def test_recorded_requests_hold_what_the_server_received_without_the_key() -> None:
    with LocalServer(record_requests=True) as srv:
        _evaluate(srv, answer="first")
        _evaluate(srv, answer="second")
        got = srv.requests
        assert [(r.method, r.path, r.status) for r in got] == [
            ("POST", "/api/v1/evals/reward", 200)
        ] * 2
        assert [r.json()["messages"][-1]["content"] for r in got] == ["first", "second"]
        assert got[0].headers["api-key"] == "***" and srv.api_key not in json.dumps(
            [r.headers for r in got]
        )
        srv.clear_requests()
        assert srv.requests == []


def test_the_record_is_bounded_and_keeps_the_latest() -> None:
    with LocalServer(record_requests=2) as srv:
        for answer in ("one", "two", "three"):
            _evaluate(srv, answer=answer)
        assert [r.json()["messages"][-1]["content"] for r in srv.requests] == ["two", "three"]
    with pytest.raises(ValueError, match="record_requests"):
        LocalServer(record_requests=-1)


def test_a_refused_request_is_recorded_with_its_status() -> None:
    with LocalServer(api_keys=["right"], record_requests=True) as srv:
        answer = HTTP.post(
            f"{srv.base_url}/api/v1/evals/reward", headers={"API-Key": "wrong"}, json={}
        )
        assert answer.status_code == 401
        assert [r.status for r in srv.requests] == [401]


def test_the_server_names_its_judge_on_every_answer() -> None:
    with LocalServer() as srv:
        answer = HTTP.post(f"{srv.base_url}/api/v1/evals/reward", json={})
        assert answer.headers[JUDGE_HEADER] == "heuristic"
        assert "x-composo-judge-model" not in answer.headers  # it runs no model


# -- the heuristic judge ------------------------------------------------------------------------


def _bundled_scores(criterion: str) -> dict[str, list[float]]:
    items = [json.loads(x) for x in DATA.read_text().splitlines() if x.strip()]
    out: dict[str, list[float]] = {"good": [], "flawed": []}
    with LocalServer() as srv, Composo(api_key=srv.api_key, base_url=srv.base_url) as client:
        for result in client.evaluate_many_iter(items, [criterion], progress=False):
            assert result.response is not None and result.response.score is not None
            out[items[result.index]["tags"]["expected"]].append(result.response.score)
    return out


def test_heuristic_scores_good_answers_of_the_bundled_data_clearly_above_flawed_ones() -> None:
    scores = _bundled_scores(RESOLVES)
    good, flawed = statistics.fmean(scores["good"]), statistics.fmean(scores["flawed"])
    assert good - flawed >= 0.08, (good, flawed)
    ordered = sum(g > f for g in scores["good"] for f in scores["flawed"])
    assert ordered / (len(scores["good"]) * len(scores["flawed"])) > 0.65


def test_heuristic_explanations_lead_with_their_verdict_not_a_shared_preamble() -> None:
    items = [json.loads(x) for x in DATA.read_text().splitlines() if x.strip()][:12]
    with LocalServer() as srv, Composo(api_key=srv.api_key, base_url=srv.base_url) as client:
        texts = [
            r.response.explanation
            for r in client.evaluate_many_iter(items, [RESOLVES], progress=False)
            if r.response is not None
        ]
    assert len({t[:30] for t in texts}) > len(texts) // 2
    assert all(t.startswith("Score ") for t in texts)


def test_heuristic_flags_figures_not_in_the_context() -> None:
    system = {"role": "system", "content": "Returns are accepted within 30 days."}
    question = {"role": "user", "content": "How long do I have to return a tent?"}
    with LocalServer() as srv, Composo(api_key=srv.api_key, base_url=srv.base_url) as client:
        right, wrong = (
            client.evaluate(
                messages=[system, question, {"role": "assistant", "content": text}],
                criteria=RESOLVES,
            )
            for text in ("You have 30 days to return the tent.", "You have 90 days to return it.")
        )
    assert right.score is not None and wrong.score is not None and right.score > wrong.score
    assert re.search(r"figure.*\b90\b", wrong.explanation or "")  # the figure it flagged


# -- the summary and the report --------------------------------------------------------------


@pytest.fixture(scope="module")
def local_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Any]:
    tmp = tmp_path_factory.mktemp("run")
    data = _dataset(
        tmp / "data.jsonl",
        [
            (
                "How do refunds work?",
                "Refunds reach your card within 5 days of the return.",
                "good",
            ),
            (HOSTILE, HOSTILE + " is what you asked", HOSTILE),
            ("Where is my parcel?", "x " * 400 + "END-OF-LONG-ANSWER", "flawed"),
        ],
    )
    out = tmp / "out.jsonl"
    done = run_composo(
        "evaluate",
        data,
        "-c",
        "Reward answers that explain the refund",
        "-c",
        "binary_stays_on_topic",
        "-c",
        "tool_selection",
        "-o",
        out,
        "--local",
    )
    assert done.returncode == 0, done.stderr
    return data, out, done


def test_summary_names_the_development_judge_and_separates_scored_from_not_applicable(
    local_run: tuple[Path, Path, Any],
) -> None:
    _, out, done = local_run
    err = done.stderr
    assert "judge: heuristic, the offline development stand-in" in err
    assert "model core: the server's default" in err
    assert "count = items scored" in err
    row = next(x for x in err.splitlines() if x.startswith("│ tool_selection"))
    cells = [c.strip() for c in row.strip("│").split("│")]
    assert cells[1] == "0" and cells[6] == "3"  # none scored, all three not applicable
    binary = next(x for x in err.splitlines() if x.startswith("│ binary_stays_on_topic"))
    assert "pass " in binary and "%" in binary
    # the full sentence of a short name, and where the results went
    assert criteria.binary_stays_on_topic in " ".join(err.split())
    assert f"results written to {out}" in " ".join(err.split())


def test_report_shows_the_run_escaped_questions_answers_and_tags(
    local_run: tuple[Path, Path, Any], tmp_path: Path
) -> None:
    _, out, _ = local_run
    html_path = tmp_path / "report.html"
    done = run_composo("report", out, "-o", html_path)
    assert done.returncode == 0, done.stderr
    page = html_path.read_text(encoding="utf-8")
    # hostile markup never becomes markup: the page holds only its data and its own script
    # (tests/test_view.py shows such strings rendered as text in a browser, running nothing)
    assert parse(page).tags.count("script") == 2 and "<b>bold</b>" not in page
    data = page_data(page)
    (run,) = data["runs"]
    assert dict(run["facts"])["judge"].startswith("heuristic, the offline development stand-in")
    conversations = [c["messages"] for c in data["conversations"].values()]
    said = [m["text"] for messages in conversations for m in messages]
    assert HOSTILE in said and HOSTILE + " is what you asked" in said  # kept as written
    assert "How do refunds work?" in said and any("END-OF-LONG-ANSWER" in t for t in said)
    assert set(run["by_tag"]["expected"]) == {"good", "flawed", HOSTILE}
    # tool_selection never applied: no mean ("no data" on the page), all three not applicable
    tool = next(c for c in run["criteria"] if c["label"] == "tool_selection")
    assert (tool["mean"], tool["scored"], tool["na"]) == (None, 0, 3)


def test_report_without_the_dataset_still_works_and_says_the_judge_is_unknown(
    tmp_path: Path,
) -> None:
    out = tmp_path / "plain.jsonl"
    out.write_text(
        json.dumps(
            {
                "index": 0,
                "id": "a",
                "criterion": RESOLVES,
                "score": 0.5,
                "explanation": "fine",
                "error": None,
            }
        )
        + "\n"
    )
    done = run_composo("report", out, "-o", tmp_path / "r.html")
    assert done.returncode == 0, done.stderr
    (run,) = page_data(tmp_path / "r.html")["runs"]
    assert dict(run["facts"])["judge"].startswith("not recorded") and run["by_tag"] == {}
    missing = run_composo("report", out, "--data", tmp_path / "nope.jsonl", "-o", tmp_path / "x")
    assert missing.returncode == 2 and "--data" in missing.stderr


def test_the_report_names_the_judge_from_a_served_run(tmp_path: Path) -> None:
    # Against `composo serve`-style servers the CLI learns the judge from the answers.
    data = _dataset(tmp_path / "d.jsonl", [("q?", "an answer of some words here", "good")])
    out = tmp_path / "o.jsonl"
    with LocalServer() as srv:
        done = run_composo(
            "evaluate", data, "-c", RESOLVES, "-o", out,
            "--base-url", srv.base_url, "--api-key", srv.api_key,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(out.with_name("o.jsonl.run.json").read_text())["judge"] == "heuristic"
    assert "judge: heuristic" in done.stderr
    assert len(read_rows(out)) == 1


# -- did you mean, a port in use ----------------------------------------------------------------


def test_a_mistyped_command_gets_a_suggestion() -> None:
    done = run_composo("evalute", "data.jsonl")
    assert done.returncode == 2
    assert (
        done.stderr.strip().splitlines() == [done.stderr.strip()]
        and "did you mean 'evaluate'?" in done.stderr
    )


def test_a_mistyped_criterion_name_gets_a_suggestion(tmp_path: Path) -> None:
    data = _dataset(tmp_path / "d.jsonl", [("q", "a", "good")])
    done = run_composo("evaluate", data, "-c", "rag_faithfullness", "--local")
    assert done.returncode == 2 and "did you mean 'rag_faithfulness'?" in done.stderr
    written = run_composo("evaluate", data, "-c", "helpfulness please", "--local")
    assert written.returncode == 2 and "did you mean" not in written.stderr


def test_a_port_in_use_is_one_line() -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        done = run_composo("serve", "--port", port)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and f"port {port}" in done.stderr
    assert "already in use" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize(
    "name",
    ["evaluate_trace.py", "responses_builtin_tools.py", "responses_mcp.py", "trace_agents.py"],
)
def test_examples_that_call_openai_say_what_they_need_without_a_key(name: str) -> None:
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.startswith(("COMPOSO_", "OPENAI_"))}
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / name)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT / "examples",
    )
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "OPENAI_API_KEY" in done.stderr
