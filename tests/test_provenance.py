"""Every score names the judge that made it and how it came: fresh from the judge, from the result
cache, or from an earlier run being resumed; in each result row, the run record, the summary, the
JUnit and markdown files and the report. A cache holds one entry per server, and a run that mixes
judges says so for each row and in the summary."""

from __future__ import annotations

import json
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from composo._cache import ResultCache
from tests.support.cli import conversation, page_data, read_rows, run_cli
from tests.support.loopback import Loopback, Seen, answer
from tests.support.openai_standin import OpenAIStandIn, chat_completion
from tests.support.servers import ServerProcess

REFUND = "Reward answers that explain the refund policy"
STAND_IN = "heuristic, the offline development stand-in"


def _dataset(path: Path, n: int) -> Path:
    path.write_text("".join(conversation(i) + "\n" for i in range(n)))
    return path


def _evaluate(
    base_url: str, api_key: str, data: Path, out: Path, cache: Path, *extra: object
) -> subprocess.CompletedProcess[str]:
    done = run_cli(
        "evaluate", data, "-c", REFUND, "--base-url", base_url, "--api-key", api_key,
        "--cache-dir", cache, "-o", out, *extra,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done


def _record(out: Path) -> dict[str, Any]:
    record: dict[str, Any] = json.loads(out.with_name(out.name + ".run.json").read_text())
    return record


def _report(out: Path) -> dict[str, Any]:
    """The report's run: its facts (judge, scores, model core) as a dict, and the page's data."""
    page = out.with_suffix(".html")
    done = run_cli("report", out, "-o", page)
    assert done.returncode == 0, done.stderr
    data = page_data(page)
    return {**dict(data["runs"][0]["facts"]), "data": data}


def _summary_head(stderr: str) -> str:
    return stderr[stderr.index("composo evaluate: summary") :].split("criteria:")[0]


def test_fresh_scores_name_the_heuristic_judge_everywhere(
    live: ServerProcess, tmp_path: Path
) -> None:
    data, out = _dataset(tmp_path / "d.jsonl", 3), tmp_path / "fresh.jsonl"
    junit, md = tmp_path / "junit.xml", tmp_path / "summary.md"
    done = _evaluate(
        live.base_url, live.api_key, data, out, tmp_path / "cache",
        "--junit-xml", junit, "--summary-md", md,
    )  # fmt: skip
    rows = read_rows(out)
    assert {(r["judge"], r["source"], r["model_core"]) for r in rows} == {
        ("heuristic", "fresh", None)
    }
    record = _record(out)
    assert record["judge"] == "heuristic"
    assert record["judges"] == {"heuristic": 3} and record["sources"] == {"fresh": 3}
    head = _summary_head(done.stderr)
    assert STAND_IN in head and "3 fresh from the judge" in head
    cases = ET.parse(junit).getroot().iter("testcase")
    props = [{p.get("name"): p.get("value") for p in c.iter("property")} for c in cases]
    assert props == [{"judge": "heuristic", "source": "fresh"}] * 3
    summary = md.read_text()
    assert f"**Judge:** {STAND_IN}" in summary and "3 fresh from the judge" in summary
    facts = _report(out)
    assert facts["judge"].startswith(STAND_IN) and facts["scores"] == "3 fresh from the judge"


def test_cached_scores_still_name_the_heuristic_judge(live: ServerProcess, tmp_path: Path) -> None:
    data, cache = _dataset(tmp_path / "d.jsonl", 3), tmp_path / "cache"
    _evaluate(live.base_url, live.api_key, data, tmp_path / "one.jsonl", cache)
    live.reset()
    out = tmp_path / "two.jsonl"
    done = _evaluate(live.base_url, live.api_key, data, out, cache)
    assert live.requests() == []  # all three from the cache
    assert {(r["judge"], r["source"]) for r in read_rows(out)} == {("heuristic", "cache")}
    record = _record(out)
    assert record["judge"] == "heuristic" and record["sources"] == {"cache": 3}
    head = _summary_head(done.stderr)
    assert STAND_IN in head and "3 from the result cache" in head
    assert "Composo platform" not in done.stderr
    facts = _report(out)
    assert facts["judge"].startswith(STAND_IN) and facts["scores"] == "3 from the result cache"


def test_a_resumed_run_keeps_the_judge_of_the_rows_it_did_not_redo(
    live: ServerProcess, tmp_path: Path
) -> None:
    data, cache, out = _dataset(tmp_path / "d.jsonl", 2), tmp_path / "cache", tmp_path / "o.jsonl"
    _evaluate(live.base_url, live.api_key, data, out, cache)
    done = _evaluate(live.base_url, live.api_key, data, out, cache)  # all done: nothing sent
    record = _record(out)
    assert record["judge"] == "heuristic" and record["sources"] == {"resumed": 2}
    head = _summary_head(done.stderr)
    assert STAND_IN in head and "2 from an earlier run (resumed)" in head
    facts = _report(out)
    assert facts["judge"].startswith(STAND_IN)
    assert facts["scores"] == "2 from an earlier run (resumed)"

    _dataset(data, 3)  # one more line: one fresh score beside two resumed
    _evaluate(live.base_url, live.api_key, data, out, cache, "--no-cache")
    assert _record(out)["sources"] == {"fresh": 1, "resumed": 2}
    assert [r["source"] for r in sorted(read_rows(out), key=lambda r: r["index"])] == [
        "fresh",
        "fresh",
        "fresh",
    ]  # each row keeps how it was made when it was written


def test_a_cache_shared_by_two_servers_keeps_their_answers_apart(
    live: ServerProcess, tmp_path: Path
) -> None:
    data, cache = _dataset(tmp_path / "d.jsonl", 2), tmp_path / "cache"
    _evaluate(live.base_url, live.api_key, data, tmp_path / "a.jsonl", cache)
    with ServerProcess() as other:
        done = _evaluate(other.base_url, other.api_key, data, tmp_path / "b.jsonl", cache)
        assert "cache: 0 answer(s) from the cache, 2 request(s) sent" in done.stderr
        assert len(other.requests()) == 2
    assert {r["source"] for r in read_rows(tmp_path / "b.jsonl")} == {"fresh"}
    assert ResultCache(cache).info().entries == 4  # one entry per server and request


def test_a_run_that_mixes_judges_says_so_per_row_and_in_the_summary(
    live: ServerProcess, openai_standin: OpenAIStandIn, tmp_path: Path
) -> None:
    data, cache, out = _dataset(tmp_path / "d.jsonl", 2), tmp_path / "cache", tmp_path / "o.jsonl"
    env = {"OPENAI_BASE_URL": openai_standin.base_url, "OPENAI_API_KEY": "sk-test"}
    verdict = json.dumps({"applicable": True, "score": 0.75, "explanation": "explains it"})
    for _ in range(2):
        openai_standin.queue_chat(chat_completion(content=verdict))
    with ServerProcess(extra_args=["--judge", "openai", "--judge-model", "m"], env=env) as judged:
        _evaluate(judged.base_url, judged.api_key, data, out, cache)
    _dataset(data, 4)
    md = tmp_path / "summary.md"
    done = _evaluate(live.base_url, live.api_key, data, out, cache, "--summary-md", md)
    judges = {r["index"]: r["judge"] for r in read_rows(out)}
    assert judges == {0: "openai", 1: "openai", 2: "heuristic", 3: "heuristic"}
    record = _record(out)
    assert record["judge"] == "mixed" and record["judges"] == {"openai": 2, "heuristic": 2}
    assert record["sources"] == {"fresh": 2, "resumed": 2}
    head = _summary_head(done.stderr)
    assert "mixed, each row names its judge" in head
    assert "openai (a local Composo-compatible server): 2 score(s)" in head
    assert f"{STAND_IN} (surface signals, not quality scores): 2 score(s)" in head
    assert "mixed, each row names its judge" in md.read_text()
    facts = _report(out)
    assert facts["judge"].startswith("mixed, each row names its judge")
    data = facts["data"]
    # the criterion says it had two judges, so the page names each score's judge
    assert data["runs"][0]["criteria"][0]["judges"] == {"openai": 2, "heuristic": 2}
    cells = sorted((i["index"], i["runs"][0]["0"][3]) for i in data["items"])
    assert cells == [(0, "openai"), (1, "openai"), (2, "heuristic"), (3, "heuristic")]


def test_a_platform_answer_names_the_platform_and_its_model_core(tmp_path: Path) -> None:
    def platform(sock: Any, seen: Seen) -> None:  # answers as the platform does: no judge header
        answer(sock, {"score": 0.9, "explanation": "clear about refunds"})

    data, out = _dataset(tmp_path / "d.jsonl", 2), tmp_path / "o.jsonl"
    with Loopback(platform) as srv:
        done = _evaluate(
            srv.url, "key-0123456789", data, out, tmp_path / "cache",
            "--model-core", "align-20250529",
        )  # fmt: skip
    rows = read_rows(out)
    assert {(r["judge"], r["model_core"]) for r in rows} == {("platform", "align-20250529")}
    assert _record(out)["judges"] == {"platform align-20250529": 2}
    assert "the Composo platform, model core align-20250529" in _summary_head(done.stderr)


def test_rows_of_an_older_version_take_the_judge_their_record_named(
    live: ServerProcess, tmp_path: Path
) -> None:
    data, out = _dataset(tmp_path / "d.jsonl", 2), tmp_path / "o.jsonl"
    old = {"criterion": REFUND, "score": 0.5, "explanation": "ok", "error": None}
    out.write_text("".join(json.dumps({"index": i, "id": f"q{i}", **old}) + "\n" for i in (0, 1)))
    record = {"judge": "heuristic", "local": False, "model_core": None, "criteria": [REFUND]}
    out.with_name(out.name + ".run.json").write_text(json.dumps(record))
    done = _evaluate(live.base_url, live.api_key, data, out, tmp_path / "cache")
    assert live.requests() == []
    assert _record(out)["judges"] == {"heuristic": 2}
    assert STAND_IN in _summary_head(done.stderr)
    (out.with_name(out.name + ".run.json")).unlink()  # no record to go by: said, not guessed
    again = _evaluate(live.base_url, live.api_key, data, out, tmp_path / "cache")
    assert _record(out)["judges"] == {"unknown": 2}
    assert "not recorded" in _summary_head(again.stderr)


def test_trace_scores_name_their_judge_too(live: ServerProcess, tmp_path: Path) -> None:
    traces = Path(__file__).resolve().parents[1] / "examples" / "data" / "traces.jsonl"
    out = tmp_path / "t.jsonl"
    done = run_cli(
        "evaluate-traces", traces, "-c", "Reward agents that complete the task",
        "--base-url", live.base_url, "--api-key", live.api_key, "-o", out,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    rows = read_rows(out)
    assert rows and {(r["judge"], r["source"]) for r in rows} == {("heuristic", "fresh")}
    assert _record(out)["judges"] == {"heuristic": len(rows)}
    assert STAND_IN in _summary_head(done.stderr)
