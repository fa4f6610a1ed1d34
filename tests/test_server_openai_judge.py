"""The ``openai`` judge against the loopback stand-in for an OpenAI-compatible endpoint."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from composo import APIError, Composo, TaskFailedError
from composo._core.trace import trace_from_messages
from composo.server import LocalServer
from composo.server._config import JudgeOptions
from composo.types import Provenance
from tests.support.openai_standin import OpenAIStandIn, chat_completion
from tests.support.servers import HTTP, ServerProcess
from tests.support.serving import InThread

QA = [
    {"role": "user", "content": "What is the capital of France?"},
    {"role": "assistant", "content": "Paris."},
]


def verdict(score: float | None, explanation: str = "because", applicable: bool = True) -> Any:
    text = json.dumps({"applicable": applicable, "score": score, "explanation": explanation})
    return chat_completion(content=text, model="judge-mini")


@pytest.fixture
def judged(openai_standin: OpenAIStandIn) -> Iterator[Composo]:
    options = JudgeOptions(model="judge-mini", api_key="sk-test", base_url=openai_standin.base_url)
    with (
        LocalServer(judge="openai", judge_options=options) as srv,
        Composo(api_key=srv.api_key, base_url=srv.base_url) as c,
    ):
        yield c


def chat_requests(oa: OpenAIStandIn) -> list[dict[str, Any]]:
    return [r["body"] for r in oa.requests if r["path"].endswith("/chat/completions")]


def test_reward_verdict_and_what_the_judge_is_asked(
    judged: Composo, openai_standin: OpenAIStandIn
) -> None:
    openai_standin.queue_chat(verdict(0.75, "names Paris"))
    res = judged.evaluate(messages=QA, criteria="Reward correct answers", system="Be brief")
    assert (res.score, res.explanation) == (0.75, "names Paris")
    assert res.provenance == Provenance("openai", "judge-mini", "fresh")  # which model judged
    (body,) = chat_requests(openai_standin)
    assert body["model"] == "judge-mini"
    assert body["response_format"] == {"type": "json_object"}
    assert body["temperature"] == 0
    system, user = (m["content"] for m in body["messages"])
    assert "Penalize" in system and "applicable" in system  # the written rubric
    assert "Criterion: Reward correct answers" in user
    assert "graded" in user
    assert "Be brief" in user
    assert ">>> JUDGED [assistant] Paris." in user
    assert "[user] What is the capital of France?" in user


def test_binary_and_not_applicable(judged: Composo, openai_standin: OpenAIStandIn) -> None:
    openai_standin.queue_chat(verdict(1, "it passes"), verdict(None, "no tools", applicable=False))
    assert judged.evaluate(messages=QA, criteria="Passes if the answer names a city").score == 1.0
    na = judged.evaluate(messages=QA, criteria="Reward good tool calls")
    assert na.score is None and na.explanation == "no tools"
    first = chat_requests(openai_standin)[0]["messages"][1]["content"]
    assert isinstance(first, str)
    assert "binary" in first


def test_unusable_answers_are_sent_back_then_retried(
    judged: Composo, openai_standin: OpenAIStandIn
) -> None:
    openai_standin.queue_chat(
        chat_completion(content="I think it is good"),
        verdict(0.5, "binary needs 0 or 1"),
        verdict(0.0, "does not pass"),
    )
    res = judged.evaluate(messages=QA, criteria="Passes if the answer explains its reasoning")
    assert res.score == 0.0
    bodies = chat_requests(openai_standin)
    assert len(bodies) == 3
    assert "not a JSON object" in bodies[1]["messages"][-1]["content"]
    assert "exactly 0 or 1" in bodies[2]["messages"][-1]["content"]


def test_parse_failures_are_reported(judged: Composo, openai_standin: OpenAIStandIn) -> None:
    openai_standin.on_chat(lambda body: chat_completion(content='{"score": 7, "explanation": "x"}'))
    with pytest.raises(APIError, match="could not be used after 3 attempts") as info:
        judged.evaluate(messages=QA, criteria="Reward correct answers")
    assert info.value.status_code == 502
    task = judged.evaluate(messages=QA, criteria="Reward correct answers", block=False)
    with pytest.raises(TaskFailedError, match=r"outside 0\.\.1"):
        judged.wait(task["task_id"], timeout=10, poll_interval=0.05)


def test_endpoint_errors(judged: Composo, openai_standin: OpenAIStandIn) -> None:
    openai_standin.fail(503)
    openai_standin.queue_chat(verdict(0.9))
    assert judged.evaluate(messages=QA, criteria="Reward correct answers").score == 0.9
    for _ in range(4):
        openai_standin.fail(401, "Incorrect API key provided")
    with pytest.raises(APIError, match="Incorrect API key provided"):
        judged.evaluate(messages=QA, criteria="Reward correct answers")


def test_trace_asks_once_per_agent_instance(judged: Composo, openai_standin: OpenAIStandIn) -> None:
    trace = trace_from_messages(QA, name="answerer", agent_id="a1")
    openai_standin.queue_chat(verdict(0.6, "fine"))
    res = judged.evaluate_trace(trace, criteria="Reward agents that answer correctly")
    assert res.agent_scores == {"a1": 0.6}
    (body,) = chat_requests(openai_standin)
    assert "agent 'answerer'" in body["messages"][1]["content"]


def test_command_line_reads_openai_environment(openai_standin: OpenAIStandIn) -> None:
    openai_standin.queue_chat(verdict(0.25, "from the command line"))
    env = {"OPENAI_BASE_URL": openai_standin.base_url, "OPENAI_API_KEY": "sk-env"}
    extra = ["--judge", "openai", "--judge-model", "served-judge"]
    with (
        ServerProcess(extra_args=extra, env=env) as srv,
        Composo(api_key=srv.api_key, base_url=srv.base_url) as c,
    ):
        assert c.evaluate(messages=QA, criteria="Reward correct answers").score == 0.25
    assert chat_requests(openai_standin)[0]["model"] == "served-judge"


def test_openai_judge_without_a_key_or_endpoint_is_refused() -> None:
    with pytest.raises(ValueError, match="OPENAI_API_KEY"):
        LocalServer(judge="openai").start()


def test_not_applicable_without_a_score_is_accepted(
    judged: Composo, openai_standin: OpenAIStandIn
) -> None:
    answer = json.dumps({"applicable": False, "explanation": "no tool was called"})
    openai_standin.queue_chat(chat_completion(content=answer))
    res = judged.evaluate(messages=QA, criteria="Reward correct tool calls")
    assert (res.score, res.explanation) == (None, "no tool was called")
    assert len(chat_requests(openai_standin)) == 1  # accepted as it was, not asked again


class _Busy:
    """An OpenAI-compatible endpoint that first answers 429 with ``Retry-After``, then a verdict."""

    def __init__(self, retry_after: str) -> None:
        import http.server
        import time

        self.times: list[float] = []
        busy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("content-length", 0)))
                busy.times.append(time.monotonic())
                if len(busy.times) == 1:
                    status, body = 429, {"error": {"message": "slow down"}}
                    extra = {"Retry-After": retry_after}
                else:
                    status, body, extra = 200, verdict(0.8, "after waiting"), {}
                data = json.dumps(body).encode()
                self.send_response(status)
                for name, value in {"Content-Type": "application/json", **extra}.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.serving = InThread(self.server)

    def __enter__(self) -> _Busy:
        self.serving.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.serving.stop()


@pytest.mark.parametrize(
    ("retry_after", "cap", "least", "most"),
    [("1", 30.0, 0.95, 5.0), ("3600", 0.5, 0.45, 5.0)],
    ids=["honoured", "capped"],
)
def test_judge_endpoint_retry_after_is_honoured_and_capped(
    monkeypatch: pytest.MonkeyPatch, retry_after: str, cap: float, least: float, most: float
) -> None:
    from composo.server.judges import _openai_judge as openai_judge

    monkeypatch.setattr(openai_judge, "MAX_RETRY_AFTER", cap)
    with _Busy(retry_after) as busy:
        options = JudgeOptions(model="judge-mini", api_key="sk-test", base_url=busy.base_url)
        with (
            LocalServer(judge="openai", judge_options=options) as srv,
            Composo(api_key=srv.api_key, base_url=srv.base_url) as c,
        ):
            assert c.evaluate(messages=QA, criteria="Reward correct answers").score == 0.8
    assert len(busy.times) == 2
    assert least <= busy.times[1] - busy.times[0] <= most


def test_the_judge_retries_by_the_client_policy(openai_standin: OpenAIStandIn) -> None:
    """One policy for both: 5xx retried (two retries), 401 not retried, Retry-After read by the
    same parser."""

    options = JudgeOptions(model="judge-mini", api_key="sk-test", base_url=openai_standin.base_url)
    body = {"messages": QA, "evaluation_criteria": "Reward correct answers"}
    with LocalServer(judge="openai", judge_options=options) as srv:
        url, headers = srv.base_url + "/api/v1/evals/reward", {"API-Key": srv.api_key}
        openai_standin.fail(401, "Incorrect API key provided")
        r = HTTP.post(url, json=body, headers=headers, timeout=30)
        assert r.status_code == 502 and "401" in r.text
        assert len(chat_requests(openai_standin)) == 1  # not asked again
        openai_standin.requests.clear()
        for _ in range(3):
            openai_standin.fail(503)
        r = HTTP.post(url, json=body, headers=headers, timeout=30)
        assert r.status_code == 502 and "503" in r.text
        assert len(chat_requests(openai_standin)) == 3  # the first attempt and two retries
