"""Traces from OpenTelemetry: the real Anthropic client, instrumented by OpenInference's
instrumentor, against the loopback Anthropic stand-in; its spans exported by the real SDK to an
OTLP/JSON file (the OTLP exporter's own encoder) and by the real OTLP/HTTP exporter to
``composo serve --otlp``. The same run must give the same trace live, from the file and from the
endpoint."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from composo import trace_from_otlp
from composo.tracing import AgentTracer, ComposoTracer, Instruments, read_otlp
from tests.support.anthropic_standin import AnthropicStandIn, message, tool_use
from tests.support.otlp_files import OtlpJsonFileExporter
from tests.support.servers import HTTP, TEST_API_KEY, ServerProcess

if TYPE_CHECKING:
    import anthropic

MODEL = "claude-sonnet-4-5"
WEATHER = {
    "name": "get_weather",
    "description": "Current weather for a city",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
}
CRITERION = "Reward agents that answer the user's question using their tools"


@pytest.fixture(scope="module")
def standin() -> Iterator[AnthropicStandIn]:
    with AnthropicStandIn() as s:
        yield s


@pytest.fixture
def claude(standin: AnthropicStandIn) -> anthropic.Anthropic:
    standin.reset()
    import anthropic  # the SDK loads in the workers that run these tests, not at collection

    return anthropic.Anthropic(base_url=standin.base_url, api_key="test-key", max_retries=0)


@pytest.fixture(scope="module")
def otlp_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    results = tmp_path_factory.mktemp("otlp") / "results.jsonl"
    args = ["--otlp", "--trace-criteria", CRITERION, "--otlp-results", str(results)]
    # idle long enough that a loaded machine's pause between two spans of a run never ends it
    args += ["--otlp-idle", "2"]
    with ServerProcess(extra_args=args) as srv:
        srv.results = results  # type: ignore[attr-defined]
        yield srv


def two_agent_run(claude: anthropic.Anthropic, standin: AnthropicStandIn) -> AgentTracer:
    """A planner that calls a tool, then hands the writing to a sub-agent (which streams)."""
    standin.queue(
        message("Let me check.", tool_use("get_weather", {"city": "Rome"}, id="toolu_rome")),
        message("It is sunny in Rome."),
        message("Sun on old stones."),
    )
    question = {"role": "user", "content": "What is the weather in Rome? Then write a haiku."}
    with AgentTracer("planner", agent_id="planner-1") as tracer:
        first = claude.messages.create(
            model=MODEL, max_tokens=200, tools=[WEATHER], messages=[question]
        )
        result = {"type": "tool_result", "tool_use_id": "toolu_rome", "content": "sunny, 24C"}
        claude.messages.create(
            model=MODEL,
            max_tokens=200,
            tools=[WEATHER],
            messages=[
                question,
                {"role": "assistant", "content": [b.model_dump() for b in first.content]},
                {"role": "user", "content": [result]},
            ],
        )
        with (
            AgentTracer("writer", agent_id="writer-1"),
            claude.messages.stream(
                model=MODEL,
                max_tokens=200,
                messages=[{"role": "user", "content": "A haiku about sun in Rome"}],
            ) as stream,
        ):
            stream.get_final_message()
    return tracer


def wait_for(fn: Any, timeout: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = fn()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting")
        time.sleep(0.05)


def finished_trace(srv: ServerProcess, trace_id: str) -> dict[str, Any]:
    def get() -> dict[str, Any] | None:
        r = HTTP.get(f"{srv.base_url}/v1/traces/{trace_id}", headers={"API-Key": TEST_API_KEY})
        return r.json() if r.status_code == 200 else None

    found: dict[str, Any] = wait_for(get)
    return found


def results_for(srv: ServerProcess, trace_id: str, count: int) -> list[dict[str, Any]]:
    path: Path = srv.results  # type: ignore[attr-defined]

    def rows() -> list[dict[str, Any]]:
        if not path.exists():
            return []
        found = [json.loads(line) for line in path.read_text().splitlines()]
        mine = [r for r in found if r["id"] == trace_id]
        return mine if len(mine) >= count else []

    found: list[dict[str, Any]] = wait_for(rows)
    return found


def test_two_agent_run_is_the_same_live_from_a_file_and_from_the_endpoint(
    claude: anthropic.Anthropic,
    standin: AnthropicStandIn,
    otlp_server: ServerProcess,
    tmp_path: Path,
) -> None:
    export = tmp_path / "export.jsonl"
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(OtlpJsonFileExporter(export)))
    endpoint = f"{otlp_server.base_url}/v1/traces"
    exporter = OTLPSpanExporter(endpoint=endpoint, headers={"API-Key": TEST_API_KEY})
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    ComposoTracer.init(Instruments.ANTHROPIC, tracer_provider=provider, agent_spans=True)
    try:
        tracer = two_agent_run(claude, standin)
    finally:
        ComposoTracer.shutdown()
        provider.shutdown()
    live = tracer.trace

    # the live trace: two agents, the tool call answered, the streamed answer captured
    assert live.root_agent_instance_id == "planner-1"
    planner = live.agent_instance_by_id["planner-1"]
    first, second, sub = planner.interactions
    assert sub == "writer-1"
    assert [m.content.name for m in first.output_messages if m.type == "tool_call"] == [
        "get_weather"
    ]
    assert first.tools_available is not None and first.tools_available[0].name == "get_weather"
    assert second.input_messages[-1].content.response == "sunny, 24C"
    [haiku] = live.agent_instance_by_id["writer-1"].interactions
    assert haiku.output_messages[0].content == "Sun on old stones."

    from_file = trace_from_otlp(export)
    assert from_file == live
    [converted] = list(read_otlp(export))
    assert converted.notes == []

    entry = finished_trace(otlp_server, converted.trace_id)
    assert entry["error"] is None
    from composo import MultiAgentTrace

    assert MultiAgentTrace.model_validate(entry["trace"]) == live
    # evaluated against --trace-criteria as background tasks of the server
    task_id = entry["tasks"][CRITERION]
    [row] = results_for(otlp_server, converted.trace_id, 1)
    assert row["task_id"] == task_id and row["criterion"] == CRITERION
    assert isinstance(row["score"], float) and row["error"] is None
    task = HTTP.get(
        f"{otlp_server.base_url}/api/v1/evals/tasks/{task_id}", headers={"API-Key": TEST_API_KEY}
    ).json()
    assert task["status"] == "succeeded"
    assert set(task["result"]["results_by_agent_name"]) == {"planner", "writer"}


def test_endpoint_takes_otlp_json_and_finishes_a_rootless_trace_when_idle(
    claude: anthropic.Anthropic,
    standin: AnthropicStandIn,
    otlp_server: ServerProcess,
    tmp_path: Path,
) -> None:
    export = tmp_path / "export.jsonl"
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(OtlpJsonFileExporter(export)))
    ComposoTracer.init(Instruments.ANTHROPIC, tracer_provider=provider, agent_spans=True)
    try:
        tracer = two_agent_run(claude, standin)
    finally:
        ComposoTracer.shutdown()
    lines = export.read_text().splitlines()
    docs = [json.loads(line) for line in lines]
    root = docs.pop()  # the planner's agent span ends last: send everything but it
    [converted] = list(read_otlp(export))
    headers = {"API-Key": TEST_API_KEY, "Content-Type": "application/json"}
    for doc in docs:
        r = HTTP.post(f"{otlp_server.base_url}/v1/traces", json=doc, headers=headers)
        assert r.status_code == 200, r.text
    entry = finished_trace(otlp_server, converted.trace_id)  # after --otlp-idle 2
    assert any("without a new span" in n for n in entry["notes"])
    # without the planner's span, the writer's and the planner's calls are separate roots
    trace = entry["trace"]
    names = sorted(a["name"] for a in trace["agent_instance_by_id"].values())
    assert "writer" in names
    assert root["resourceSpans"]  # the left-out line was a real export
    assert tracer.trace.llm_interaction_count() == 3


def test_endpoint_refuses_bodies_that_are_not_otlp_and_wrong_keys(
    otlp_server: ServerProcess,
) -> None:
    url = f"{otlp_server.base_url}/v1/traces"
    bad = HTTP.post(
        url,
        content=b"\x00\xffnot protobuf",
        headers={"API-Key": TEST_API_KEY, "Content-Type": "application/x-protobuf"},
    )
    assert bad.status_code == 400 and "OTLP" in bad.json()["detail"]
    not_json = HTTP.post(
        url,
        content=b"{truncated",
        headers={"API-Key": TEST_API_KEY, "Content-Type": "application/json"},
    )
    assert not_json.status_code == 400
    wrong = HTTP.post(url, json={"resourceSpans": []}, headers={"API-Key": "wrong"})
    assert wrong.status_code == 401
    ok = HTTP.post(url, json={"resourceSpans": []}, headers={"API-Key": TEST_API_KEY})
    assert ok.status_code == 200


def test_serve_otlp_needs_trace_criteria() -> None:
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "composo", "serve", "--otlp"], capture_output=True, text=True
    )
    assert done.returncode == 2
    assert "--trace-criteria" in done.stderr
