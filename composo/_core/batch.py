"""Evaluate many items: consumed lazily, a bounded window of requests in flight, every result
matched to its item and criterion, and one item's failure recorded without stopping the others.

Shared by both clients; only the way a request runs differs (threads for :class:`Composo`, tasks
for :class:`AsyncComposo`). Memory is flat in the number of items: an item is held only while its
requests are pending, and results are handed over as they finish.
"""

from __future__ import annotations

import logging
import queue
from collections.abc import (
    AsyncIterable,
    Callable,
    Iterable,
    Iterator,
    Mapping,
    Sequence,
)
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeAlias

from composo._core import build, convert
from composo._core.responses import EvaluationResponse, MultiAgentTraceResponse
from composo._core.wire import RewardRequest, TraceRequest
from composo.errors import ComposoError, ComposoValidationError

if TYPE_CHECKING:
    from composo._core.client import Composo

__all__ = ["BatchResult", "Job", "Plan", "Progress", "stream"]

_log = logging.getLogger("composo")

Response: TypeAlias = EvaluationResponse | MultiAgentTraceResponse
Request: TypeAlias = RewardRequest | TraceRequest
ProgressCallback: TypeAlias = Callable[[int, int | None], None]

ITEM_FIELDS = (
    "messages",
    "input",
    "result",
    "system",
    "tools",
    "tags",
    "evaluate_latest",
    "trace",
    "id",
    "metadata",
)
_ITEM_HINT = (
    "an item holds messages (or input and result), optionally id, system, tools, tags, "
    "evaluate_latest and metadata; or a trace"
)


@dataclass(frozen=True)
class BatchResult:
    """One (item, criterion) pair: the response, or the error that stopped it.

    ``index`` is the item's position in the input; ``id`` is the item's own ``id`` field, if any.
    """

    index: int
    criterion: str
    id: str | None = None
    response: Response | None = None
    error: BaseException | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def score(self) -> float | None:
        """The score (a trace's overall score); ``None`` if not applicable or failed."""
        if isinstance(self.response, MultiAgentTraceResponse):
            return self.response.overall_score
        return self.response.score if self.response is not None else None

    @property
    def explanation(self) -> str | None:
        return self.response.explanation if self.response is not None else None

    def row(self) -> dict[str, Any]:
        """The JSON-ready record the command line writes, one per line."""
        return {
            "index": self.index,
            "id": self.id,
            "criterion": self.criterion,
            "score": self.score,
            "explanation": self.explanation,
            "error": error_text(self.error) if self.error is not None else None,
        }


def error_text(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


@dataclass(frozen=True)
class Job:
    """One item to evaluate at a given index; ``criteria`` limits it to some of the plan's criteria
    (used to resume a run) and ``error`` marks an item that could not even be read."""

    index: int
    item: Any = None
    criteria: Sequence[str] | None = None
    error: BaseException | None = None


@dataclass
class _Pending:
    index: int
    criterion: str
    id: str | None
    request: Request


@dataclass
class Plan:
    """The criteria and options applied to every item; turns a :class:`Job` into requests."""

    criteria: list[str]
    by_name: bool = False
    model_core: str | None = None
    tags: Mapping[str, Any] | None = None
    evaluate_latest: bool | None = None
    explanation_cleaning: str | None = None
    data_retention: str | None = None
    _order: dict[str, int] = field(default_factory=dict, repr=False)

    @classmethod
    def create(
        cls,
        criteria: Any = None,
        evaluator_name: Any = None,
        *,
        model_core: str | None = None,
        tags: Mapping[str, Any] | None = None,
        evaluate_latest: bool | None = None,
        explanation_cleaning: str | None = None,
        data_retention: str | None = None,
    ) -> Plan:
        """Validate everything shared by the items, so mistakes surface before any request."""
        sources, _ = build.normalize_criteria(criteria, evaluator_name)
        labels = [next(iter(s.values())) for s in sources]
        if len(set(labels)) != len(labels):
            raise ComposoValidationError(
                "criteria: the same criterion is listed twice; results are matched by criterion, "
                "so list each once"
            )
        build.normalize_tags(tags)
        plan = cls(
            criteria=labels,
            by_name=evaluator_name is not None,
            model_core=build.check_model_core(model_core),
            tags=dict(tags) if tags is not None else None,
            evaluate_latest=evaluate_latest,
            explanation_cleaning=explanation_cleaning,
            data_retention=data_retention,
        )
        plan._order = {c: i for i, c in enumerate(labels)}
        return plan

    def position(self, criterion: str) -> int:
        return self._order.get(criterion, len(self._order))

    def expand(self, job: Job) -> Iterator[_Pending | BatchResult]:
        """The requests for one job, or one failed result per criterion if the item is unusable."""
        wanted = self.criteria if job.criteria is None else list(job.criteria)
        if not wanted:
            return
        item_id: str | None = None
        error = job.error
        requests: Sequence[Request] = ()
        if error is None:
            try:
                fields = self._fields(job)
                item_id = _item_id(fields.get("id"))
                requests = self._requests(fields, wanted)
            except Exception as exc:  # a bad item is recorded, never fatal
                error = exc
        if error is not None:
            for criterion in wanted:
                yield BatchResult(job.index, criterion, item_id, None, error)
            return
        for criterion, request in zip(wanted, requests, strict=True):
            yield _Pending(job.index, criterion, item_id, request)

    def _fields(self, job: Job) -> Mapping[str, Any]:
        fields = convert.to_item(job.item)
        unknown = [k for k in fields if k not in ITEM_FIELDS]
        if unknown:
            raise ComposoValidationError(f"item: unknown field {unknown[0]!r}; {_ITEM_HINT}")
        return fields

    def _requests(self, fields: Mapping[str, Any], wanted: list[str]) -> Sequence[Request]:
        source: dict[str, Any] = {"evaluator_name" if self.by_name else "criteria": wanted}
        tags = self.tags
        if fields.get("tags") is not None:
            own = fields["tags"]
            if not isinstance(own, Mapping):
                raise ComposoValidationError(
                    "tags: expected a dict of strings, e.g. {'env': 'prod'}"
                )
            tags = {**(self.tags or {}), **own}
        common: dict[str, Any] = {
            "model_core": self.model_core,
            "tags": tags,
            "explanation_cleaning": self.explanation_cleaning,
            "data_retention": self.data_retention,
        }
        if fields.get("trace") is not None:
            extra = [k for k in ("messages", "input", "result", "system", "tools") if k in fields]
            if extra:
                raise ComposoValidationError(
                    f"item: {extra[0]!r} cannot be combined with 'trace'; an item is either a "
                    "conversation or a trace"
                )
            traces, _ = build.trace_requests(trace=fields["trace"], **source, **common)
            return traces
        latest = fields.get("evaluate_latest", self.evaluate_latest)
        rewards, _ = build.reward_requests(
            messages=fields.get("messages"),
            input=fields.get("input"),
            result=fields.get("result"),
            system=fields.get("system"),
            tools=fields.get("tools"),
            evaluate_latest=latest,
            **source,
            **common,
        )
        return rewards


def _item_id(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, (str, int)) and not isinstance(value, bool):
        return str(value)
    raise ComposoValidationError(f"id: expected a string or an integer, got {type(value).__name__}")


def jobs_from(items: Iterable[Any]) -> Iterator[Job]:
    """Each item at its position; nothing is read ahead."""
    for index, item in enumerate(items):
        yield Job(index, item)


def check_items(items: Any) -> None:
    if isinstance(items, (str, bytes, Mapping)) or not isinstance(items, (Iterable, AsyncIterable)):
        raise ComposoValidationError(
            f"items: expected an iterable of items (a list, a generator...), got "
            f"{type(items).__name__}; for one conversation use evaluate()"
        )


def window_size(concurrency: int | None, limit: int) -> int:
    """Requests kept in flight: ``concurrency`` (default: the client's limit), never above it."""
    if concurrency is None:
        return limit
    if not isinstance(concurrency, int) or isinstance(concurrency, bool) or concurrency < 1:
        raise ComposoValidationError(
            f"concurrency: must be an integer of at least 1, got {concurrency!r}"
        )
    if concurrency > limit:
        _log.warning(
            "concurrency=%d is above the client's max_concurrent_requests=%d; at most %d requests "
            "run at once (raise max_concurrent_requests on the client to go faster)",
            concurrency,
            limit,
            limit,
        )
        return limit
    return concurrency


# -- progress -----------------------------------------------------------------------------------


class Progress:
    """Counts finished pairs and shows them: a rich bar (``progress=True``) or the caller's
    ``callback(done, total)``."""

    def __init__(self, option: bool | ProgressCallback, total: int | None) -> None:
        self.done = 0
        self.total = total
        self._callback: ProgressCallback | None = None
        self._bar: Any = None
        self._task: Any = None
        if callable(option):
            self._callback = option
        elif option:
            # Checked now, so a missing extra is reported before any request is made.
            try:
                from rich.console import Console
                from rich.progress import (
                    BarColumn,
                    MofNCompleteColumn,
                    TextColumn,
                    TimeElapsedColumn,
                    TimeRemainingColumn,
                )
                from rich.progress import Progress as RichProgress
            except ImportError:
                raise ComposoError(
                    "progress=True needs the rich package: pip install 'composo[cli]'"
                ) from None
            self._bar = RichProgress(
                TextColumn("[progress.description]{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                TimeRemainingColumn(),
                console=Console(stderr=True),
            )

    def start(self) -> None:
        if self._bar is not None and self._task is None:
            self._bar.start()
            self._task = self._bar.add_task("evaluating", total=self.total)

    @staticmethod
    def total_for(items: Any, per_item: int) -> int | None:
        try:
            return len(items) * per_item
        except TypeError:
            return None

    def advance(self) -> None:
        self.done += 1
        if self._callback is not None:
            self._callback(self.done, self.total)
        elif self._task is not None:
            self._bar.update(self._task, completed=self.done)

    def close(self) -> None:
        if self._task is not None:
            self._bar.stop()
            self._task = None


# -- running ------------------------------------------------------------------------------------


def _finished(p: _Pending, response: Any = None, error: BaseException | None = None) -> BatchResult:
    return BatchResult(p.index, p.criterion, p.id, response, error)


def _run_sync(client: Composo, p: _Pending) -> BatchResult:
    try:
        return _finished(p, client._run_one(p.request, True))
    except Exception as exc:  # recorded on the result
        return _finished(p, error=exc)


def stream(
    client: Composo, jobs: Iterable[Job], plan: Plan, window: int, progress: Progress | None = None
) -> Iterator[BatchResult]:
    """Results as they finish, with at most ``window`` requests in flight (threads)."""
    pool = ThreadPoolExecutor(max_workers=window, thread_name_prefix="composo-batch")
    finished: queue.SimpleQueue[BatchResult] = queue.SimpleQueue()
    in_flight = 0

    def work(p: _Pending) -> None:
        try:
            result = _run_sync(client, p)
        except BaseException as exc:  # still hand a result back, or the reader would wait forever
            result = _finished(p, error=exc)
        finished.put(result)

    if progress is not None:
        progress.start()
    try:
        for job in jobs:
            for step in plan.expand(job):
                if isinstance(step, BatchResult):
                    _tick(progress)
                    yield step
                    continue
                while in_flight >= window:
                    in_flight -= 1
                    _tick(progress)
                    yield finished.get()
                pool.submit(work, step)
                in_flight += 1
        while in_flight:
            in_flight -= 1
            _tick(progress)
            yield finished.get()
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
        if progress is not None:
            progress.close()


def _tick(progress: Progress | None) -> None:
    if progress is not None:
        progress.advance()


def setup(
    items: Any,
    criteria: Any,
    evaluator_name: Any,
    concurrency: int | None,
    progress: bool | ProgressCallback,
    limit: int,
    **options: Any,
) -> tuple[Plan, int, Progress | None]:
    """Everything ``evaluate_many`` checks before the first request: the items are iterable, the
    criteria and options are valid, the concurrency is sane, the progress bar can be shown."""
    check_items(items)
    plan = Plan.create(criteria, evaluator_name, **options)
    window = window_size(concurrency, limit)
    bar = None
    if progress:
        bar = Progress(progress, Progress.total_for(items, len(plan.criteria)))
    return plan, window, bar


def ordered(results: Iterable[BatchResult], plan: Plan) -> list[BatchResult]:
    """A list in item order, then in the order the criteria were given."""
    out = sorted(results, key=lambda r: (r.index, plan.position(r.criterion)))
    failed = sum(1 for r in out if r.error is not None)
    if failed:
        _log.warning(
            "%d of %d evaluations failed; each failed result carries its .error", failed, len(out)
        )
    return out
