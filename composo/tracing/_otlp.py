"""OTLP trace exports (OTLP/JSON lines or one document; protobuf for the OTLP/HTTP endpoint)
-> span records -> one ``MultiAgentTrace`` per trace id. Memory stays bounded: a file of lines is
read twice, first to learn where each trace id ends, then to convert each trace once its last line
is read; a trace id over ``max_spans`` keeps only a count.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from composo._core.trace import MultiAgentTrace
from composo.errors import ComposoValidationError
from composo.tracing._spans import EVENT_PREFIX
from composo.tracing._spantree import Converted, SpanRecord, convert_spans

__all__ = [
    "MAX_SPANS_PER_TRACE",
    "OtlpReader",
    "SpanGroups",
    "read_otlp",
    "records_from_json",
    "records_from_protobuf",
    "trace_from_otlp",
]

MAX_SPANS_PER_TRACE = 10_000  # spans of one trace id before it is reported too large (not kept)
_TRACE_ID_TEXT = re.compile(rb'"trace_?[iI]d"\s*:\s*"([0-9A-Za-z+/=]+)"')
_STATUS_ERROR = 2
_HEX = re.compile(r"[0-9a-fA-F]+")


def _hex_id(value: Any, width: int) -> str | None:
    """A span or trace id as lower-case hex (OTLP/JSON writes hex, protobuf's mapping base64)."""
    if not isinstance(value, str) or not value:
        return None
    if len(value) == width and _HEX.fullmatch(value):
        return value.lower() if value.strip("0") else None
    try:
        raw = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return None
    return raw.hex() if len(raw) * 2 == width and raw.strip(b"\0") else None


def _value(v: Any) -> Any:
    """An OTLP/JSON ``AnyValue`` as a Python value."""
    if not isinstance(v, Mapping):
        return v
    for key in ("stringValue", "boolValue", "doubleValue", "bytesValue"):
        if key in v:
            return v[key]
    if "intValue" in v:
        try:
            return int(v["intValue"])
        except (TypeError, ValueError):
            return v["intValue"]
    if "arrayValue" in v:
        return [_value(x) for x in (v["arrayValue"] or {}).get("values") or ()]
    if "kvlistValue" in v:
        items = (v["kvlistValue"] or {}).get("values") or ()
        return {str(kv.get("key")): _value(kv.get("value")) for kv in items}
    return None


def _int(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


@dataclass
class Problems:
    """Damage found while reading: per trace id, and for spans that name no trace."""

    by_trace: dict[str, list[str]] = field(default_factory=dict)
    general: list[str] = field(default_factory=list)

    def add(self, trace_id: str | None, message: str) -> None:
        if trace_id is None:
            if len(self.general) < 100:
                self.general.append(message)
            return
        found = self.by_trace.setdefault(trace_id, [])
        if len(found) < 10:
            found.append(message)


def records_from_json(
    doc: Any, problems: Problems | None = None, where: str = "input"
) -> Iterator[SpanRecord]:
    """The readable spans of one parsed OTLP/JSON ``ExportTraceServiceRequest`` (or a list);
    ``problems`` collects the others, naming the input ``where`` (e.g. ``"line 3"``)."""
    problems = problems if problems is not None else Problems()
    if isinstance(doc, list):
        for item in doc:
            yield from records_from_json(item, problems, where)
        return
    if not isinstance(doc, Mapping) or not isinstance(doc.get("resourceSpans"), list):
        problems.add(None, f"{where}: not an OTLP trace export (no 'resourceSpans' list)")
        return
    for scope, span in _json_spans(doc):
        record = _json_span(span, scope, problems, where)
        if record is not None:
            yield record


def _json_spans(doc: Mapping[str, Any]) -> Iterator[tuple[str, Any]]:
    """``(instrumentation scope name, span)`` for each span of one OTLP/JSON document."""
    for resource in doc.get("resourceSpans") or ():
        if not isinstance(resource, Mapping):
            continue
        scopes = resource.get("scopeSpans") or resource.get("instrumentationLibrarySpans") or ()
        for scope_spans in scopes:
            if not isinstance(scope_spans, Mapping):
                continue
            scope = scope_spans.get("scope") or scope_spans.get("instrumentationLibrary") or {}
            scope_name = str(scope.get("name") or "") if isinstance(scope, Mapping) else ""
            for span in scope_spans.get("spans") or ():
                yield scope_name, span


def _json_span(span: Any, scope: str, problems: Problems, where: str) -> SpanRecord | None:
    if not isinstance(span, Mapping):
        problems.add(None, f"{where}: a span that is not a JSON object was skipped")
        return None
    trace_id = _hex_id(span.get("traceId"), 32)
    span_id = _hex_id(span.get("spanId"), 16)
    name = str(span.get("name") or "")
    if trace_id is None:
        problems.add(None, f"{where}: span {name!r} has no valid traceId and was skipped")
        return None
    if span_id is None:
        problems.add(trace_id, f"{where}: span {name!r} has no valid spanId and was skipped")
        return None
    attributes = _json_attributes(span.get("attributes"))
    events = []
    for event in span.get("events") or ():
        if isinstance(event, Mapping) and str(event.get("name") or "").startswith(EVENT_PREFIX):
            events.append((str(event["name"]), _json_attributes(event.get("attributes"))))
    status = span.get("status") or {}
    code = status.get("code") if isinstance(status, Mapping) else None
    failed = code in (_STATUS_ERROR, "STATUS_CODE_ERROR")
    return SpanRecord(
        trace_id=trace_id,
        span_id=span_id,
        parent_id=_hex_id(span.get("parentSpanId"), 16),
        name=name,
        attributes=attributes,
        start=_int(span.get("startTimeUnixNano")),
        end=_int(span.get("endTimeUnixNano")),
        error=str(status.get("message") or "error") if failed else None,
        scope=scope,
        events=events,
    )


def _json_attributes(items: Any) -> dict[str, Any]:
    """An OTLP/JSON ``KeyValue`` list as a dict."""
    out: dict[str, Any] = {}
    for kv in items if isinstance(items, list) else ():
        if isinstance(kv, Mapping) and "key" in kv:
            out[str(kv["key"])] = _value(kv.get("value"))
    return out


def records_from_protobuf(data: bytes) -> Iterator[SpanRecord]:
    """The spans of one protobuf-encoded ``ExportTraceServiceRequest``, through its JSON mapping
    (``ImportError`` without ``opentelemetry-proto``, ``ValueError`` for another message)."""
    try:
        from google.protobuf.json_format import MessageToDict  # type: ignore[import-untyped]
        from google.protobuf.message import DecodeError  # type: ignore[import-untyped]
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceRequest,
        )
    except ImportError as exc:
        raise ImportError(
            "reading OTLP protobuf needs opentelemetry-proto: pip install 'composo[otlp]'"
        ) from exc
    request = ExportTraceServiceRequest()
    try:
        request.ParseFromString(data)
    except DecodeError as exc:
        raise ValueError(f"not an OTLP ExportTraceServiceRequest: {exc}") from exc
    return records_from_json(MessageToDict(request))


class SpanGroups:
    """Spans grouped by trace id, each group bounded by ``max_spans`` (beyond it only counted)."""

    def __init__(self, max_spans: int = MAX_SPANS_PER_TRACE) -> None:
        if max_spans < 1:
            raise ComposoValidationError(f"max_spans: must be at least 1, got {max_spans}")
        self.max_spans = max_spans
        self.spans: dict[str, list[SpanRecord]] = {}
        self.counts: dict[str, int] = {}

    def add(self, record: SpanRecord) -> None:
        n = self.counts.get(record.trace_id, 0) + 1
        self.counts[record.trace_id] = n
        if n > self.max_spans:
            self.spans.pop(record.trace_id, None)  # too large: free what it held
            return
        self.spans.setdefault(record.trace_id, []).append(record)

    def pop(self, trace_id: str, problems: Problems | None = None) -> Converted:
        """Convert the trace id's spans (or report why not) and forget them."""
        spans = self.spans.pop(trace_id, [])
        count = self.counts.pop(trace_id, 0)
        damage = problems.by_trace.pop(trace_id, None) if problems is not None else None
        if count > self.max_spans:
            error = (
                f"trace {trace_id}: {count} spans, more than the limit of {self.max_spans}; its "
                "spans were not kept. Raise the limit with max_spans= (--max-spans) if such "
                "traces are expected"
            )
            return Converted(trace_id, spans=count, error=error)
        if damage and any("damaged" in d for d in damage):
            error = f"trace {trace_id}: incomplete, not evaluated: {'; '.join(damage)}"
            return Converted(trace_id, spans=count, error=error)
        converted = convert_spans(trace_id, spans)
        if damage:
            converted.notes.extend(damage)
            if converted.error is not None:
                converted.error += f"; while reading: {'; '.join(damage)}"
        return converted


@dataclass
class OtlpTrace:
    """One trace id of an export, converted: its position in the input and the conversion."""

    index: int
    converted: Converted


class OtlpReader:
    """Read an OTLP/JSON export (a path, a parsed document or a list of them) trace by trace.

    ``index`` numbers trace ids in the order they first appear, so a re-run matches results to
    traces; after iterating, ``problems`` lists damage that belongs to no trace id.
    """

    def __init__(self, source: Any, *, max_spans: int = MAX_SPANS_PER_TRACE) -> None:
        if isinstance(source, (str, os.PathLike)):
            path = Path(source)
            if not path.is_file():
                raise ComposoValidationError(f"source: no such file: {path}")
            self._path: Path | None = path
            self._docs: list[Any] = []
        elif isinstance(source, (Mapping, list)):
            self._path, self._docs = None, [source]
        else:
            raise ComposoValidationError(
                f"source: expected a file path or a parsed OTLP export (a dict), got "
                f"{type(source).__name__}"
            )
        self._groups = SpanGroups(max_spans)
        self._problems = Problems()
        self.problems: list[str] = []

    def __iter__(self) -> Iterator[OtlpTrace]:
        if self._path is None:
            yield from self._whole(self._docs, "input")
        elif _is_lines(self._path):
            yield from self._lines(self._path)
        else:
            raw = self._path.read_bytes()
            try:
                doc = json.loads(raw)
            except ValueError as exc:
                self._damaged(raw, self._path.name, exc)
                doc = None
            yield from self._whole([] if doc is None else [doc], self._path.name)
        self.problems = list(self._problems.general)

    def _damaged(self, raw: bytes, where: str, exc: Exception) -> set[str]:
        ids = (_hex_id(m.group(1).decode(), 32) for m in _TRACE_ID_TEXT.finditer(raw))
        found = {tid for tid in ids if tid is not None}
        message = f"{where} is damaged (not valid JSON: {exc})"
        if not found:
            self._problems.add(None, f"{message}; no trace id could be read from it")
        for tid in found:
            self._problems.add(tid, f"{message} and holds spans of this trace")
        return found

    def _whole(self, docs: list[Any], where: str) -> Iterator[OtlpTrace]:
        order: dict[str, int] = {tid: i for i, tid in enumerate(self._problems.by_trace)}
        for doc in docs:
            for record in records_from_json(doc, self._problems, where):
                order.setdefault(record.trace_id, len(order))
                self._groups.add(record)
        for tid in list(self._problems.by_trace):
            order.setdefault(tid, len(order))
        for tid, index in order.items():
            yield OtlpTrace(index, self._groups.pop(tid, self._problems))

    def _lines(self, path: Path) -> Iterator[OtlpTrace]:
        # pass 1: where each trace id appears first (its index) and last (when it is complete)
        order: dict[str, int] = {}
        last: dict[str, int] = {}
        damaged: set[int] = set()
        with path.open("rb") as f:
            for n, raw in enumerate(f):
                if not raw.strip():
                    continue
                try:
                    tids = _trace_ids(json.loads(raw))
                except ValueError as exc:
                    tids = self._damaged(raw, f"line {n + 1}", exc)
                    damaged.add(n)
                for tid in tids:
                    order.setdefault(tid, len(order))
                    last[tid] = n
        ending: dict[int, list[str]] = {}
        for tid, n in last.items():
            ending.setdefault(n, []).append(tid)
        # pass 2: group, converting each trace after its last line
        with path.open("rb") as f:
            for n, raw in enumerate(f):
                if raw.strip() and n not in damaged:
                    try:
                        doc = json.loads(raw)
                    except ValueError:  # pragma: no cover - the file changed between passes
                        doc = None
                    for record in records_from_json(doc, self._problems, f"line {n + 1}"):
                        self._groups.add(record)
                for tid in ending.pop(n, ()):
                    yield OtlpTrace(order[tid], self._groups.pop(tid, self._problems))
        for tids in ending.values():  # pragma: no cover - the file shrank between passes
            for tid in tids:
                yield OtlpTrace(order[tid], self._groups.pop(tid, self._problems))


def _trace_ids(doc: Any) -> Iterable[str]:
    seen: dict[str, None] = {}
    for item in doc if isinstance(doc, list) else [doc]:
        for _, span in _json_spans(item) if isinstance(item, Mapping) else ():
            tid = _hex_id(span.get("traceId"), 32) if isinstance(span, Mapping) else None
            if tid is not None:
                seen[tid] = None
    return seen


def _is_lines(path: Path) -> bool:
    """Whether the file is one JSON document per line (the Collector's file exporter)."""
    with path.open("rb") as f:
        lines = (raw for raw in f if raw.strip())
        first = next(lines, b"")
        more = next(lines, None) is not None
    if not more:
        return True  # a single line: the same either way
    try:
        json.loads(first)
    except ValueError:
        return False
    return True


def read_otlp(source: Any, *, max_spans: int = MAX_SPANS_PER_TRACE) -> Iterator[Converted]:
    """Every trace id of an OTLP/JSON export (a file path, or parsed export documents), as a
    :class:`~composo.tracing.Converted`: ``trace`` or ``error``, and ``notes``. ``max_spans``: spans
    one trace id may have before it is reported as too large.

    Raises:
        ComposoValidationError: ``source`` is not a file or an export document.
    """
    for item in OtlpReader(source, max_spans=max_spans):
        yield item.converted


def trace_from_otlp(
    source: Any, *, trace_id: str | None = None, max_spans: int = MAX_SPANS_PER_TRACE
) -> MultiAgentTrace:
    """The trace in an OTLP/JSON export (an OpenTelemetry Collector file export, or one document).

    Args:
        source: A file path, or a parsed ``ExportTraceServiceRequest`` dict (or a list of them).
        trace_id: Which trace (hex) when the export holds several.
        max_spans: Spans the trace may have.

    Returns:
        The trace, agents and sub-agents from its agent spans, model calls from its LLM spans.

    Raises:
        ComposoValidationError: The source cannot be read, holds no trace (or several and no
            ``trace_id``), or the trace has no model call (the message says why).
    """
    wanted = trace_id.lower() if trace_id else None
    found = [c for c in read_otlp(source, max_spans=max_spans) if wanted in (None, c.trace_id)]
    if not found:
        where = f" with trace id {trace_id}" if trace_id else ""
        raise ComposoValidationError(f"source: the export holds no trace{where}")
    if len(found) > 1:
        ids = ", ".join(c.trace_id for c in found[:5])
        raise ComposoValidationError(
            f"source: the export holds {len(found)} traces ({ids}...); pass trace_id= to choose "
            "one, or use composo.tracing.read_otlp to read them all"
        )
    item = found[0]
    if item.trace is None:
        raise ComposoValidationError(item.error or f"trace {item.trace_id}: no trace")
    return item.trace
