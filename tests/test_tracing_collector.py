"""``TraceCollector``, the span grouping behind ``composo serve --otlp``, fed protobuf export
bodies encoded by the OTLP exporter's own encoder from real SDK spans: a trace is done when its
root span arrives or after the idle time, and the number of traces held is bounded."""

from __future__ import annotations

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from composo.tracing._collector import PROTOBUF, TraceCollector

LLM = {
    "openinference.span.kind": "LLM",
    "llm.input_messages.0.message.role": "user",
    "llm.input_messages.0.message.content": "hi",
    "llm.output_messages.0.message.role": "assistant",
    "llm.output_messages.0.message.content": "hello",
}


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def spans(count: int = 1) -> tuple[list[bytes], list[bytes]]:
    """For ``count`` traces (an agent span around a model call): the bodies of the model calls
    and, separately, of the roots (the agent spans end last)."""
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    app = provider.get_tracer("app")
    for i in range(count):
        with (
            app.start_as_current_span(f"agent{i}", attributes={"openinference.span.kind": "AGENT"}),
            app.start_as_current_span("llm", attributes=LLM),
        ):
            pass
    done = memory.get_finished_spans()
    calls = [encode_spans([s]).SerializeToString() for s in done if s.name == "llm"]
    roots = [encode_spans([s]).SerializeToString() for s in done if s.name != "llm"]
    return calls, roots


def test_a_trace_is_done_when_its_root_arrives() -> None:
    (call,), (root,) = spans()
    collector = TraceCollector(clock=Clock())
    assert collector.ingest(call, PROTOBUF) == 1
    assert collector.finished() == []
    assert collector.ingest(root, PROTOBUF) == 1
    [done] = collector.finished()
    assert done.trace is not None and done.error is None
    [agent] = done.trace.agent_instance_by_id.values()
    assert agent.name == "agent0"
    assert collector.finished() == [] and collector.open_traces == 0


def test_a_rootless_trace_is_done_after_the_idle_time() -> None:
    (call,), _ = spans()
    clock = Clock()
    collector = TraceCollector(idle_seconds=5, clock=clock)
    collector.ingest(call, f"{PROTOBUF}; charset=binary")
    clock.now = 4.9
    assert collector.finished() == []
    clock.now = 5.0
    [done] = collector.finished()
    assert done.trace is not None
    assert "finished after 5s without a new span" in done.notes


def test_open_traces_are_bounded() -> None:
    calls, _ = spans(3)
    clock = Clock()
    collector = TraceCollector(max_open=2, clock=clock)
    for i, body in enumerate(calls):
        clock.now = float(i)
        collector.ingest(body, PROTOBUF)
    assert collector.open_traces == 2
    [early] = collector.finished()  # the longest idle went first
    assert any("more than 2 traces were open" in n for n in early.notes)
    rest = collector.flush()
    assert len(rest) == 2 and collector.open_traces == 0


def test_a_body_that_is_not_an_export_is_refused() -> None:
    collector = TraceCollector()
    for body, kind in ((b"\x0a\xff", PROTOBUF), (b"{", "application/json"), (b"[]", "")):
        try:
            collector.ingest(body, kind)
        except ValueError as exc:
            assert str(exc)
        else:
            raise AssertionError(f"accepted {body!r}")
