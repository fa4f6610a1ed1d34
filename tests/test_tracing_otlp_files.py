"""OTLP/JSON files as the OpenTelemetry SDK writes them (the OTLP exporter's own encoder), read by
``trace_from_otlp`` / ``read_otlp`` and ``composo evaluate-traces``: span kinds beyond model calls,
damaged files, spans missing fields, a trace three times over the span limit."""

from __future__ import annotations

import json
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from composo import ComposoValidationError, trace_from_otlp
from composo.tracing import AgentTracer, ComposoTracer, Instruments, read_otlp
from tests.support.anthropic_standin import AnthropicStandIn, message, tool_use
from tests.support.cli import run_composo
from tests.support.otlp_files import OtlpJsonFileExporter
from tests.support.servers import ServerProcess

MODEL = "claude-sonnet-4-5"
CRITERION = "Reward answers that address the user's question"
KIND = "openinference.span.kind"


@pytest.fixture(scope="module")
def standin() -> Iterator[AnthropicStandIn]:
    with AnthropicStandIn() as s:
        yield s


@pytest.fixture
def traced(standin: AnthropicStandIn, tmp_path: Path) -> Iterator[tuple[TracerProvider, Path]]:
    """A provider writing an OTLP/JSON file, with the Anthropic instrumentor on."""
    standin.reset()
    export = tmp_path / "export.jsonl"
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(OtlpJsonFileExporter(export)))
    ComposoTracer.init(Instruments.ANTHROPIC, tracer_provider=provider, agent_spans=True)
    yield provider, export
    ComposoTracer.shutdown()


def run_cli(args: list[str]) -> tuple[int, str, str]:
    done = run_composo(*args)
    return done.returncode, done.stdout, done.stderr


def ask(standin: AnthropicStandIn, text: str, answer: str) -> None:
    standin.queue(message(answer))
    import anthropic  # loaded by the tests that use it, not at collection

    client = anthropic.Anthropic(base_url=standin.base_url, api_key="k", max_retries=0)
    client.messages.create(model=MODEL, max_tokens=50, messages=[{"role": "user", "content": text}])


def test_retriever_and_unknown_spans_are_kept_as_context(
    standin: AnthropicStandIn, traced: tuple[TracerProvider, Path]
) -> None:
    provider, export = traced
    app = provider.get_tracer("app")
    with AgentTracer("rag", agent_id="rag-1"):
        attrs = {KIND: "RETRIEVER", "input.value": "refund policy", "output.value": "30 days"}
        with app.start_as_current_span("retrieve", attributes=attrs):
            pass
        with app.start_as_current_span(
            "moderate", attributes={KIND: "MYSTERY", "output.value": "clean"}
        ):
            pass
        with app.start_as_current_span("http GET"):  # no kind, no payload
            pass
        ask(standin, "How long do refunds take?", "30 days.")
    [converted] = list(read_otlp(export))
    assert converted.trace is not None
    [call] = converted.trace.agent_instance_by_id["rag-1"].interactions
    context = [m for m in call.input_messages if m.role == "context"]
    assert [m.type for m in context] == ["retriever", "mystery"]
    assert "30 days" in str(context[0].content) and "refund policy" in str(context[0].content)
    assert "1 retriever span(s) kept as context of the next model call" in converted.notes
    assert "1 mystery span(s) kept as context of the next model call" in converted.notes
    assert "1 unlabelled span without a payload left out" in converted.notes


def test_a_trace_without_a_model_call_is_reported_with_its_reason(
    standin: AnthropicStandIn, traced: tuple[TracerProvider, Path]
) -> None:
    provider, export = traced
    app = provider.get_tracer("app")
    with app.start_as_current_span("pipeline", attributes={KIND: "CHAIN"}):
        with app.start_as_current_span("llm", attributes={KIND: "LLM"}):  # no messages at all
            pass
        with app.start_as_current_span("search", attributes={KIND: "TOOL", "tool.name": "s"}):
            pass
    with AgentTracer("ok", agent_id="ok-1"):
        ask(standin, "hi", "hello")
    bad, good = list(read_otlp(export))
    assert good.trace is not None and bad.trace is None
    assert bad.error is not None
    assert bad.trace_id in bad.error and "no LLM interaction among its 3 span(s)" in bad.error
    assert "model call without input or output messages" in bad.error
    with pytest.raises(ComposoValidationError, match="holds 2 traces"):
        trace_from_otlp(export)
    assert trace_from_otlp(export, trace_id=good.trace_id) == good.trace
    with pytest.raises(ComposoValidationError, match="no LLM interaction"):
        trace_from_otlp(export, trace_id=bad.trace_id)


def two_traces(standin: AnthropicStandIn, export: Path) -> list[str]:
    with AgentTracer("first", agent_id="a-1"):
        ask(standin, "one?", "One.")
    with AgentTracer("second", agent_id="b-1"):
        ask(standin, "two?", "Two.")
    return export.read_text().splitlines()


def test_a_truncated_file_fails_only_the_trace_it_cut(
    standin: AnthropicStandIn, traced: tuple[TracerProvider, Path]
) -> None:
    _, export = traced
    lines = two_traces(standin, export)
    # a write cut short: the last export line loses its end
    export.write_text("\n".join(lines[:-1]) + "\n" + lines[-1][: len(lines[-1]) - 40])
    first, second = list(read_otlp(export))
    assert first.trace is not None
    assert first.trace.agent_instance_by_id["a-1"].name == "first"
    assert second.trace is None and second.error is not None
    assert "incomplete" in second.error and f"line {len(lines)} is damaged" in second.error


def test_spans_missing_ids_are_reported_and_the_rest_is_read(
    standin: AnthropicStandIn, traced: tuple[TracerProvider, Path]
) -> None:
    _, export = traced
    lines = two_traces(standin, export)
    doc = json.loads(lines[0])  # the first trace's model call
    span = doc["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    del span["spanId"]
    lines[0] = json.dumps(doc)
    export.write_text("\n".join(lines) + "\n")
    first, second = list(read_otlp(export))
    assert first.trace is None and first.error is not None
    assert "has no valid spanId and was skipped" in first.error
    assert second.trace is not None


def big_trace_file(path: Path, batches: int, per_batch: int) -> Path:
    """One trace of ``batches * per_batch`` SDK spans (written by the OTLP encoder once, then
    repeated with fresh span ids per batch), followed by a small trace with a model call."""
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    app = provider.get_tracer("app")
    with app.start_as_current_span("huge", attributes={KIND: "CHAIN"}):
        for i in range(per_batch - 1):
            with app.start_as_current_span("step", attributes={KIND: "TOOL", "n": i}):
                pass
    OtlpJsonFileExporter(path).export(memory.get_finished_spans())
    memory.clear()
    batch = json.loads(path.read_text())
    spans = batch["resourceSpans"][0]["scopeSpans"][0]["spans"]
    lines = []
    for k in range(batches):
        for span in spans:
            span["spanId"] = f"{k + 1:04x}" + span["spanId"][4:]
        lines.append(json.dumps(batch))
    path.write_text("\n".join(lines) + "\n")
    llm = {
        KIND: "LLM",
        "llm.input_messages.0.message.role": "user",
        "llm.input_messages.0.message.content": "hi",
        "llm.output_messages.0.message.role": "assistant",
        "llm.output_messages.0.message.content": "hello",
    }
    with app.start_as_current_span("small", attributes=llm):
        pass
    OtlpJsonFileExporter(path).export(memory.get_finished_spans())
    return path


def test_a_trace_over_the_span_limit_is_refused_and_the_rest_read(tmp_path: Path) -> None:
    # Just over the default limit (10,000): the boundary is what is checked, and a trace several
    # times larger only costs more spans to build and read.
    export = big_trace_file(tmp_path / "big.jsonl", 11, 910)
    big, small = list(read_otlp(export))
    assert big.trace is None and big.error is not None
    assert "10010 spans, more than the limit of 10000" in big.error
    assert "--max-spans" in big.error
    assert small.trace is not None and small.trace.llm_interaction_count() == 1


def test_reading_a_large_trace_holds_one_export_line_not_the_trace(tmp_path: Path) -> None:
    export = big_trace_file(tmp_path / "large.jsonl", 20, 500)
    size = export.stat().st_size
    tracemalloc.start()
    try:
        big, small = list(read_otlp(export, max_spans=100))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert big.error is not None and "10000 spans, more than the limit of 100" in big.error
    assert small.trace is not None
    # one export line (500 spans) plus at most 100 kept: holding every span parsed would take
    # several times the file's size
    assert peak < size, (peak, size)


def test_evaluate_traces_cli_scores_resumes_and_reports_per_trace_errors(
    standin: AnthropicStandIn,
    traced: tuple[TracerProvider, Path],
    live: ServerProcess,
    tmp_path: Path,
) -> None:
    provider, export = traced
    lines = two_traces(standin, export)
    with provider.get_tracer("app").start_as_current_span("idle", attributes={KIND: "CHAIN"}):
        pass
    out = tmp_path / "results.jsonl"
    args = ["evaluate-traces", str(export), "-c", CRITERION, "-o", str(out)]
    args += ["--api-key", live.api_key, "--base-url", live.base_url]
    code, _, err = run_cli(args)
    assert code == 1, err  # one trace could not be evaluated
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["index"] for r in sorted(rows, key=lambda r: r["index"])] == [0, 1, 2]
    scored = [r for r in rows if r["error"] is None]
    assert len(scored) == 2 and all(isinstance(r["score"], float) for r in scored)
    [failed] = [r for r in rows if r["error"] is not None]
    assert "no LLM interaction" in failed["error"] and failed["id"] in failed["error"]
    assert "3 trace(s) read, 1 could not be evaluated" in err
    assert len(lines) == 4  # two model calls and two agent spans

    sent = len(live.requests())
    code, _, err = run_cli(args)  # resume: the scored traces are not sent again
    assert code == 1
    assert "2 pair(s) already scored" in err
    assert len(live.requests()) == sent
    assert len(out.read_text().splitlines()) == 3

    report = tmp_path / "report.html"
    code, _, err = run_cli(["report", str(out), "-o", str(report)])
    assert code == 0 and "no LLM interaction" in report.read_text()


def test_evaluate_traces_gates_exit_3(
    standin: AnthropicStandIn,
    traced: tuple[TracerProvider, Path],
    live: ServerProcess,
    tmp_path: Path,
) -> None:
    _, export = traced
    two_traces(standin, export)
    args = ["evaluate-traces", str(export), "-c", CRITERION, "-o", str(tmp_path / "r.jsonl")]
    args += ["--api-key", live.api_key, "--base-url", live.base_url, "--fail-under", "*=1.01"]
    code, _, err = run_cli(args)
    assert code == 2 and "--fail-under" in err  # a threshold above 1 is a usage error
    args[-1] = "*=0.999"
    code, _, err = run_cli(args)
    assert code == 3 and "gate FAILED" in err


def test_evaluate_traces_refuses_a_missing_file(tmp_path: Path) -> None:
    code, _, err = run_cli(
        ["evaluate-traces", str(tmp_path / "nope.jsonl"), "-c", CRITERION, "--local"]
    )
    assert code == 2 and "no such file" in err


def test_single_document_and_base64_ids_read_the_same(
    standin: AnthropicStandIn, traced: tuple[TracerProvider, Path], tmp_path: Path
) -> None:
    provider, export = traced
    b64 = tmp_path / "b64.jsonl"
    provider.add_span_processor(SimpleSpanProcessor(OtlpJsonFileExporter(b64, hex_ids=False)))
    standin.queue(message("Checking.", tool_use("lookup", {"q": "x"})))
    import anthropic  # loaded by the tests that use it, not at collection

    client = anthropic.Anthropic(base_url=standin.base_url, api_key="k", max_retries=0)
    with AgentTracer("solo", agent_id="solo-1"):
        client.messages.create(
            model=MODEL, max_tokens=50, messages=[{"role": "user", "content": "look x up"}]
        )
    whole = tmp_path / "whole.json"
    docs = [json.loads(line) for line in export.read_text().splitlines()]
    spans = [s for d in docs for s in d["resourceSpans"][0]["scopeSpans"][0]["spans"]]
    merged = docs[0]
    merged["resourceSpans"][0]["scopeSpans"][0]["spans"] = spans
    whole.write_text(json.dumps(merged, indent=2))
    assert trace_from_otlp(whole) == trace_from_otlp(export) == trace_from_otlp(b64)
    assert trace_from_otlp(merged) == trace_from_otlp(export)
