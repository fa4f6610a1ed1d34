"""What an evaluating pytest session keeps: a client recording every evaluation, the assertions'
verdicts, and the merge of pytest-xdist workers' records into one summary and results file.
Loaded in every pytest session, so nothing optional is imported unless asked for.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import os
import threading
import weakref
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from composo._client import Composo
from composo.errors import ComposoError, ComposoValidationError

_NO_NODE = "(outside a test)"


@dataclass(frozen=True)
class Outcome:
    """One evaluation's verdict, as the session records it and the assertions check it;
    ``item``: a batch item's own id."""

    criterion: str
    score: float | None
    explanation: str | None
    error: str | None = None
    item: str | None = None


def outcome(result: Any, criterion: str | None = None) -> Outcome | None:
    """What a response or a batch result says (``None`` for anything else, a task handle)."""
    from composo._core.plan import BatchResult
    from composo._core.responses import EvaluationResponse, MultiAgentTraceResponse

    if isinstance(result, BatchResult):
        row = result.row()
        return Outcome(row["criterion"], row["score"], row["explanation"], row["error"], result.id)
    if isinstance(result, MultiAgentTraceResponse):
        score = result.overall_score
    elif isinstance(result, EvaluationResponse):
        score = result.score
    else:
        return None
    return Outcome(criterion or result.criterion or "(criterion)", score, result.explanation)


class Recorder:
    """Evaluations and assertion verdicts, attributed to the test running when they were made.

    Entries keep the test's node id and a per-test sequence number, so the rows written at the
    end are the same whichever worker ran which test.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.entries: list[dict[str, Any]] = []
        self.checks: list[dict[str, Any]] = []
        self.current: str | None = None
        self._seq: dict[str, int] = {}
        # id -> each recorded object, while it lives (responses are not hashable)
        self._seen: weakref.WeakValueDictionary[int, Any] = weakref.WeakValueDictionary()

    def __bool__(self) -> bool:
        return bool(self.entries or self.checks)

    # -- recording ------------------------------------------------------------------------------

    def _add(self, outcome: Outcome) -> None:
        with self._lock:
            node = self.current or _NO_NODE
            if outcome.item is not None:  # a batch item's own id, within its test
                node = f"{node}#{outcome.item}"
            seq = self._seq[node] = self._seq.get(node, 0) + 1
            entry = {"node": node, "seq": seq, **asdict(outcome)}
            del entry["item"]  # in the node
            self.entries.append(entry)

    def response(self, obj: Any) -> None:
        """Record an ``EvaluationResponse``, ``MultiAgentTraceResponse`` or ``BatchResult`` (a list
        of them too); anything else (a background task handle) is ignored. Each object once."""
        if isinstance(obj, (list, tuple)):
            for one in obj:
                self.response(one)
            return
        found = None if self._seen.get(id(obj)) is obj else outcome(obj)
        if found is None:
            return
        self._add(found)
        with contextlib.suppress(TypeError):  # an object that cannot be weakly referenced
            self._seen[id(obj)] = obj

    def failure(self, criteria: Any, exc: BaseException) -> None:
        """An evaluation that raised: one error row per criterion it was for."""
        from composo._core.plan import error_text

        names = [criteria] if isinstance(criteria, str) else list(criteria or ["(criterion)"])
        for name in names:
            self._add(Outcome(str(name), None, None, error_text(exc)))

    def check(self, criterion: str, passed: bool) -> None:
        with self._lock:
            self.checks.append({"criterion": criterion, "passed": bool(passed)})

    # -- merging and output ---------------------------------------------------------------------

    def dump(self) -> str:
        with self._lock:
            return json.dumps({"entries": self.entries, "checks": self.checks})

    def merge(self, data: str) -> None:
        loaded = json.loads(data)
        with self._lock:
            self.entries.extend(loaded.get("entries", []))
            self.checks.extend(loaded.get("checks", []))

    def rows(self) -> list[dict[str, Any]]:
        """Result rows in the command line's format. A test is one item (its node id is the
        row's ``id``; a batch item's own id is added as ``<node id>#<item id>``); a test that
        evaluates the same criterion again adds items ``<id>#2``, ``<id>#3``..."""
        with self._lock:
            entries = sorted(self.entries, key=lambda e: (e["node"], e["seq"]))
        count: dict[tuple[str, str], int] = {}
        keyed: list[tuple[str, dict[str, Any]]] = []
        for e in entries:
            n = count[(e["node"], e["criterion"])] = count.get((e["node"], e["criterion"]), 0) + 1
            keyed.append((e["node"] if n == 1 else f"{e['node']}#{n}", e))
        order = {item: i for i, item in enumerate(dict.fromkeys(sorted(k for k, _ in keyed)))}
        fields = ("criterion", "score", "explanation", "error")
        rows = [
            {"index": order[item], "id": item, **{k: e[k] for k in fields}} for item, e in keyed
        ]
        rows.sort(key=lambda r: (r["index"], r["criterion"]))
        return rows

    def write(self, path: Path) -> int:
        rows = self.rows()
        tmp = path.with_name(path.name + ".tmp")
        with tmp.open("w", encoding="utf-8") as f:
            for row in rows:
                f.write(json.dumps(row, ensure_ascii=False) + "\n")
        os.replace(tmp, path)
        return len(rows)

    def summary(self) -> list[list[str]]:
        """Per criterion: evaluations, mean, not applicable, errors (counted by the command
        line's run summary), then the assertions passed and failed."""
        from composo.cli._summary import CriterionStats, Summary

        with self._lock:
            checks = list(self.checks)
        stats = Summary.of(self.rows()).criteria
        asserted: dict[str, list[bool]] = {}
        for c in checks:
            asserted.setdefault(c["criterion"], []).append(c["passed"])
        out = []
        for name in dict.fromkeys([*stats, *asserted]):
            s, passed = stats.get(name, CriterionStats()), asserted.get(name, [])
            mean = "-" if s.mean is None else f"{s.mean:.2f}"
            figures = (s.count, mean, s.not_applicable, s.errors, sum(passed))
            out.append([name, *map(str, figures), str(len(passed) - sum(passed))])
        return out


def _criteria_argument(method: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    try:
        bound = inspect.signature(method).bind(*args, **kwargs)
    except TypeError:
        return None
    return bound.arguments.get("criteria") or bound.arguments.get("evaluator_name")


class RecordingComposo(Composo):
    """A :class:`~composo.Composo` that records every evaluation it makes into a session."""

    def __init__(self, recorder: Recorder, **options: Any) -> None:
        super().__init__(**options)
        self._recorder = recorder

    def _recorded(self, method: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        try:
            out = method(*args, **kwargs)
        except ComposoValidationError:
            raise  # refused before any request: not an evaluation
        except ComposoError as exc:
            self._recorder.failure(_criteria_argument(method, args, kwargs), exc)
            raise
        self._recorder.response(out)
        return out

    def evaluate(self, *args: Any, **kwargs: Any) -> Any:
        return self._recorded(super().evaluate, args, kwargs)

    def evaluate_trace(self, *args: Any, **kwargs: Any) -> Any:
        return self._recorded(super().evaluate_trace, args, kwargs)

    def evaluate_many(self, *args: Any, **kwargs: Any) -> Any:
        return self._recorded(super().evaluate_many, args, kwargs)

    def evaluate_many_iter(self, *args: Any, **kwargs: Any) -> Any:
        results = super().evaluate_many_iter(*args, **kwargs)

        def recorded() -> Iterator[Any]:
            for result in results:
                self._recorder.response(result)
                yield result

        return recorded()


class TestSession:
    """One pytest session's settings, recorder and (lazily made) client."""

    __test__ = False  # not a test class, whatever pytest's collection rules say

    def __init__(self, min_score: float | None = None, server: tuple[str, str] | None = None):
        self.min_score = min_score
        self.server = server  # (base_url, api_key) of the session's local server
        self.recorder = Recorder()
        self.written = 0  # rows written to --composo-out
        self._client: RecordingComposo | None = None
        self._lock = threading.Lock()

    def client(self) -> RecordingComposo:
        with self._lock:
            if self._client is None:
                options: dict[str, Any] = {}
                if self.server is not None:
                    options = {"base_url": self.server[0], "api_key": self.server[1]}
                try:
                    self._client = RecordingComposo(self.recorder, **options)
                except ComposoValidationError as exc:
                    raise ComposoValidationError(
                        f"{exc}; or run pytest with --composo-local to evaluate against a local "
                        "server"
                    ) from None
            return self._client

    def close(self) -> None:
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None


_active: TestSession | None = None


def active() -> TestSession | None:
    """The running pytest session's state, if the plugin set one up."""
    return _active


def activate(session: TestSession) -> None:
    global _active
    _active = session


def deactivate(session: TestSession) -> None:
    global _active
    if _active is session:
        session.close()
        _active = None
