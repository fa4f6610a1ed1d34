"""``TraceCollector``: spans arriving over OTLP/HTTP, grouped by trace id until the trace is done
(its root span arrived, or none of its spans for ``idle_seconds``). Memory is bounded: ``max_spans``
per trace and ``max_open`` traces (the longest idle is finished early, with a note).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from composo.errors import ComposoValidationError
from composo.tracing._otlp import (
    MAX_SPANS_PER_TRACE,
    Problems,
    SpanGroups,
    records_from_json,
    records_from_protobuf,
)
from composo.tracing._spantree import Converted, SpanRecord

__all__ = ["TraceCollector"]

PROTOBUF = "application/x-protobuf"


@dataclass
class _Open:
    last_seen: float
    root: bool = False


class TraceCollector:
    """Collects OTLP spans and hands back finished traces, converted (bounds as the module says;
    ``clock``: monotonic seconds, injectable for tests). A bound that is not positive raises
    ``ComposoValidationError``."""

    def __init__(
        self,
        *,
        idle_seconds: float = 30.0,
        max_spans: int = MAX_SPANS_PER_TRACE,
        max_open: int = 1000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if idle_seconds <= 0:
            raise ComposoValidationError(f"idle_seconds: must be positive, got {idle_seconds}")
        if max_open < 1:
            raise ComposoValidationError(f"max_open: must be at least 1, got {max_open}")
        self.idle_seconds = idle_seconds
        self.max_open = max_open
        self._clock = clock
        self._groups = SpanGroups(max_spans)
        self._open: dict[str, _Open] = {}
        self._ready: list[str] = []
        self._early: list[Converted] = []
        self._lock = threading.Lock()

    def ingest(self, data: bytes, content_type: str) -> int:
        """Read one decompressed OTLP/HTTP export body (protobuf or JSON by ``content_type``);
        returns how many spans were accepted, ``ValueError`` when it is no such export."""
        if content_type.split(";")[0].strip().lower() == PROTOBUF:
            records = list(records_from_protobuf(data))
        else:
            try:
                doc = json.loads(data)
            except ValueError as exc:
                raise ValueError(f"the body is not JSON: {exc}") from None
            if not isinstance(doc, dict):
                raise ValueError(
                    f"expected an ExportTraceServiceRequest object, got a {type(doc).__name__}"
                )
            problems = Problems()
            records = list(records_from_json(doc, problems, "request"))
            if problems.general and not records:
                raise ValueError("; ".join(problems.general))
        self.add(records)
        return len(records)

    def add(self, records: Iterable[SpanRecord]) -> None:
        """Spans that arrived; a root span marks its trace done."""
        now = self._clock()
        with self._lock:
            for record in records:
                state = self._open.get(record.trace_id)
                if state is None:
                    if len(self._open) >= self.max_open:
                        self._evict()
                    state = self._open[record.trace_id] = _Open(now)
                state.last_seen = now
                self._groups.add(record)
                if record.parent_id is None and not state.root:
                    state.root = True
                    self._ready.append(record.trace_id)

    def _evict(self) -> None:
        """Too many traces open: convert the longest idle one now, to hand back as done."""
        oldest = min(self._open, key=lambda t: self._open[t].last_seen)
        note = f"finished before its root span arrived: more than {self.max_open} traces were open"
        self._early.append(self._close(oldest, note))

    def _close(self, trace_id: str, *notes: str) -> Converted:
        self._open.pop(trace_id, None)
        converted = self._groups.pop(trace_id)
        converted.notes.extend(notes)
        return converted

    def finished(self) -> list[Converted]:
        """Traces that are done (root arrived, or idle), converted; each is returned once."""
        now = self._clock()
        idle = f"finished after {self.idle_seconds:g}s without a new span"
        with self._lock:
            done: dict[str, tuple[str, ...]] = dict.fromkeys(self._ready, ())
            self._ready.clear()
            for tid, state in self._open.items():
                if tid not in done and now - state.last_seen >= self.idle_seconds:
                    done[tid] = (idle,)
            out, self._early = self._early, []
            out.extend(self._close(tid, *notes) for tid, notes in done.items())
        return out

    def flush(self) -> list[Converted]:
        """Every trace still open, converted now (at shutdown)."""
        with self._lock:
            self._ready.extend(t for t in self._open if t not in self._ready)
        return self.finished()

    @property
    def open_traces(self) -> int:
        """Traces waiting for more spans."""
        return len(self._open)
