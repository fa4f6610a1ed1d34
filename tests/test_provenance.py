"""Every score names the judge that made it and how it came: fresh from the judge, from the result
cache, or from an earlier run being resumed; on each result the client returns, in each result
row, the run record, the summary, the JUnit and markdown files and the report. A cache holds one
entry per server, and a run that mixes judges says so for each row and in the summary."""

from __future__ import annotations

import json
import pickle
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from composo import AsyncComposo, Composo
from composo._cache import ResultCache
from composo._core.trace import trace_from_messages
from composo.types import EvaluationResponse, Provenance
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
    return stderr[stderr.index(": summary\n") :].split("criteria:")[0]


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
    assert "composo evaluate-traces: summary\n" in done.stderr  # each command names itself


# -- on the results the clients return --------------------------------------------------------

MESSAGES = [
    {"role": "user", "content": "How do refunds work?"},
    {"role": "assistant", "content": "Returns within 30 days get a full refund."},
]
HEURISTIC = Provenance("heuristic", None, "fresh")


def test_a_result_names_its_judge_and_whether_the_cache_gave_it(
    live: ServerProcess, tmp_path: Path
) -> None:
    with Composo(api_key=live.api_key, base_url=live.base_url, cache=tmp_path) as client:
        fresh = client.evaluate(MESSAGES, criteria=REFUND)
        cached = client.evaluate(MESSAGES, criteria=REFUND)
        (batched,) = client.evaluate_many([{"messages": MESSAGES}], REFUND)
    assert fresh.provenance == HEURISTIC and not fresh.provenance.cached
    assert cached.provenance == Provenance("heuristic", None, "cache") and cached.provenance.cached
    assert batched.provenance == cached.provenance
    assert cached == fresh  # the same verdict, wherever it came from
    # it travels with the result (to a worker, a file) and stays out of the line shown
    assert pickle.loads(pickle.dumps(batched)).provenance == cached.provenance
    assert "heuristic" not in repr(fresh) and len(repr(batched)) <= 200
    assert "heuristic, from the cache" in cached._repr_html_()
    assert "provenance" not in fresh.model_dump()
    assert EvaluationResponse.from_dict(fresh.model_dump()).provenance is None


async def test_async_trace_and_background_results_carry_it_too(live: ServerProcess) -> None:
    trace = trace_from_messages(MESSAGES, name="answerer", agent_id="a1")
    async with AsyncComposo(api_key=live.api_key, base_url=live.base_url) as client:
        verdict = await client.evaluate(MESSAGES, criteria=REFUND)
        judged = await client.evaluate_trace(trace, criteria="Reward agents that answer")
        task = await client.evaluate(MESSAGES, criteria=REFUND, block=False)
        later = await client.wait(task["task_id"], timeout=30)
    assert verdict.provenance == judged.provenance == later.provenance == HEURISTIC
    assert judged.get_rounded().provenance == HEURISTIC
    with Composo(api_key=live.api_key, base_url=live.base_url) as sync:
        task = sync.evaluate(MESSAGES, criteria=REFUND, block=False)
        assert sync.wait(task["task_id"], timeout=30).provenance == HEURISTIC


def test_a_platform_result_names_the_model_core_each_request_asked_for(tmp_path: Path) -> None:
    def platform(sock: Any, seen: Seen) -> None:  # answers as the platform does: no judge header
        answer(sock, {"score": 0.9, "explanation": "clear about refunds"})

    data, out = tmp_path / "d.jsonl", tmp_path / "o.jsonl"
    own = conversation(1, model_core="align-20260109")  # an item may ask for its own core
    data.write_text(conversation(0) + "\n" + own + "\n")
    with Loopback(platform) as srv:
        with Composo(api_key="key-0123456789", base_url=srv.url, model_core="align-20250529") as c:
            default, own_core = (
                c.evaluate(MESSAGES, criteria=REFUND),
                c.evaluate(MESSAGES, criteria=REFUND, model_core="align-20260109"),
            )
        _evaluate(srv.url, "key-0123456789", data, out, tmp_path / "cache", "--no-cache")
    assert default.provenance == Provenance("platform", "align-20250529")
    assert own_core.provenance == Provenance("platform", "align-20260109")
    rows = {r["index"]: (r["judge"], r["model_core"], r["judge_model"]) for r in read_rows(out)}
    assert rows == {0: ("platform", None, None), 1: ("platform", "align-20260109", None)}


def test_the_openai_judges_model_is_named_and_kept_by_the_cache(
    openai_standin: OpenAIStandIn, tmp_path: Path
) -> None:
    data, cache = _dataset(tmp_path / "d.jsonl", 2), tmp_path / "cache"
    env = {"OPENAI_BASE_URL": openai_standin.base_url, "OPENAI_API_KEY": "sk-test"}
    verdict = json.dumps({"applicable": True, "score": 0.75, "explanation": "explains it"})
    openai_standin.queue_chat(*[chat_completion(content=verdict)] * 2)  # the second run asks none
    extra = ["--judge", "openai", "--judge-model", "judge-mini"]
    with ServerProcess(extra_args=extra, env=env) as judged:
        _evaluate(judged.base_url, judged.api_key, data, tmp_path / "a.jsonl", cache)
        _evaluate(judged.base_url, judged.api_key, data, tmp_path / "b.jsonl", cache)
        with Composo(api_key=judged.api_key, base_url=judged.base_url, cache=cache) as client:
            (one, _) = client.evaluate_many(
                [json.loads(line) for line in data.read_text().splitlines()], REFUND
            )
    assert len([r for r in openai_standin.requests if r["path"].endswith("/completions")]) == 2
    for name, source in (("a.jsonl", "fresh"), ("b.jsonl", "cache")):
        rows = read_rows(tmp_path / name)
        assert {(r["judge"], r["judge_model"], r["model_core"], r["source"]) for r in rows} == {
            ("openai", "judge-mini", None, source)
        }
    assert one.provenance == Provenance("openai", "judge-mini", "cache")
