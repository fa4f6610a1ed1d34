"""OTLP/JSON trace files written from real SDK spans with the OTLP exporter's own encoder, the
way the OpenTelemetry Collector's file exporter writes them (one export request per line)."""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from pathlib import Path

from google.protobuf.json_format import MessageToDict
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult


def _hex_ids(node: object) -> None:
    """OTLP/JSON writes ids as hex (the Collector does); protobuf's own JSON mapping, base64."""
    import base64

    if isinstance(node, dict):
        for key in ("traceId", "spanId", "parentSpanId"):
            if isinstance(node.get(key), str):
                node[key] = base64.b64decode(node[key]).hex()
        for value in node.values():
            _hex_ids(value)
    elif isinstance(node, list):
        for value in node:
            _hex_ids(value)


class OtlpJsonFileExporter(SpanExporter):
    """Appends each export as one ``ExportTraceServiceRequest`` JSON line.

    Args:
        path: The file.
        hex_ids: Write ids as hex like the Collector (else protobuf's base64).
    """

    def __init__(self, path: Path, *, hex_ids: bool = True) -> None:
        self.path = path
        self.hex_ids = hex_ids
        self._lock = threading.Lock()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        doc = MessageToDict(encode_spans(spans))
        if self.hex_ids:
            _hex_ids(doc)
        with self._lock, self.path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(doc) + "\n")
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass
