"""What a batch run is made of, shared by the thread and task engines: the plan that turns items
into requests, the results, the progress count, the checks made before the first request. Nothing
here runs a request or knows a client."""

from __future__ import annotations

import copy
import logging
from collections.abc import AsyncIterable, Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from pydantic import ValidationError

from composo._core import build, convert
from composo._core.options import OPTION_NAMES, merge, set_options
from composo._core.plugins import get_plugin_manager
from composo._core.provenance import Provenance
from composo._core.responses import (
    EvaluationResponse,
    MultiAgentTraceResponse,
    fitted_repr,
    repr_html,
    score_text,
    short,
)
from composo._core.wire import RequestOptions, RewardRequest, TraceRequest
from composo.errors import ComposoError, ComposoValidationError, validation_error

_log = logging.getLogger("composo")

Response: TypeAlias = EvaluationResponse | MultiAgentTraceResponse
Request: TypeAlias = RewardRequest | TraceRequest
ProgressCallback: TypeAlias = Callable[[int, int | None], None]

CONVERSATION_FIELDS = ("messages", "input", "result", "system", "tools")
ITEM_FIELDS = (*CONVERSATION_FIELDS, "trace", "id", "metadata", "criteria", *OPTION_NAMES)
"""What an item may hold: a conversation (or a ``trace``), its ``id`` and ``metadata`` (both
come back on its results, neither is sent), the ``criteria`` (some of the run's) it still needs,
and any evaluate option for itself alone. Any other field is refused: nothing is dropped."""
_ITEM_HINT = (
    "an item holds messages (or input and result), optionally id, system, tools, metadata, "
    f"criteria and the options {', '.join(OPTION_NAMES)}; or a trace. Your own fields go in "
    "'metadata' (a dict, given back on each result, never sent)"
)


@dataclass(frozen=True)
class BatchResult:
    """One (item, criterion) pair of a batch: the response, or the error that stopped it.

    Attributes:
        index: The item's position in the input (0-based).
        criterion: The criterion (or evaluator name) this result is for.
        id: The item's own ``id`` field, if it had one.
        response: The evaluation's response; ``None`` if it failed.
        error: The exception that stopped this pair; ``None`` if it succeeded.
        metadata: A copy of the item's own ``metadata`` (never sent); ``None`` if it had none.
    """

    index: int
    criterion: str
    id: str | None = None
    response: Response | None = None
    error: BaseException | None = None
    metadata: dict[str, Any] | None = None

    @property
    def ok(self) -> bool:
        """Whether the pair was evaluated (a not-applicable score is still ok)."""
        return self.error is None

    @property
    def score(self) -> float | None:
        """The score (a trace's overall score); ``None`` if not applicable or failed."""
        if isinstance(self.response, MultiAgentTraceResponse):
            return self.response.overall_score
        return self.response.score if self.response is not None else None

    @property
    def explanation(self) -> str | None:
        """The judge's explanation; ``None`` if the pair failed."""
        return self.response.explanation if self.response is not None else None

    @property
    def provenance(self) -> Provenance | None:
        """Where the verdict came from (judge, model, fresh or cached); ``None`` if the pair
        failed."""
        return self.response.provenance if self.response is not None else None

    def __repr__(self) -> str:
        fields: list[tuple[str, object]] = [("index", self.index)]
        if self.id is not None:
            fields.append(("id", repr(short(self.id, 24))))
        fields.append(("criterion", repr(short(self.criterion, 40))))
        if self.error is not None:
            return fitted_repr("BatchResult", [*fields, ("error", error_text(self.error))])
        fields.append(("score", score_text(self.score)))
        return fitted_repr("BatchResult", [*fields, ("explanation", self.explanation or "")])

    def _repr_html_(self) -> str | None:
        return repr_html(self)

    def row(self) -> dict[str, Any]:
        """The JSON-ready record the command line writes, one per line."""
        return {
            "index": self.index,
            "id": self.id,
            "criterion": self.criterion,
            "score": self.score,
            "explanation": self.explanation,
            "error": error_text(self.error) if self.error is not None else None,
            "metadata": self.metadata,
        }


def error_text(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


@dataclass(frozen=True)
class Job:
    """One item to evaluate at a given index; ``criteria`` limits it to some of the plan's criteria
    and ``error`` marks an item that could not even be read."""

    index: int
    item: Any = None
    criteria: Sequence[str] | None = None
    error: BaseException | None = None


@dataclass
class Pending:
    index: int
    criterion: str
    id: str | None
    request: Request
    metadata: dict[str, Any] | None = None


@dataclass
class Plan:
    """The criteria and options applied to every item; turns a :class:`Job` into requests."""

    criteria: list[str]
    by_name: bool = False
    options: Mapping[str, Any] = field(default_factory=dict)
    _order: dict[str, int] = field(default_factory=dict, repr=False)

    @classmethod
    def create(
        cls,
        criteria: Any = None,
        evaluator_name: Any = None,
        options: Mapping[str, Any] | None = None,
    ) -> Plan:
        sources, _ = build.normalize_criteria(criteria, evaluator_name)
        labels = [next(iter(s.values())) for s in sources]
        if len(set(labels)) != len(labels):
            raise ComposoValidationError(
                "criteria: the same criterion is listed twice; results are matched by criterion, "
                "so list each once"
            )
        given = set_options(options or {})
        try:  # the wire model's own rules, once, before the first item
            RequestOptions.model_validate(
                {k: v for k, v in given.items() if k != "explanation_cleaning"}
            )
        except ValidationError as exc:
            raise validation_error(exc) from None
        plan = cls(criteria=labels, by_name=evaluator_name is not None, options=given)
        plan._order = {c: i for i, c in enumerate(labels)}
        return plan

    def position(self, criterion: str) -> int:
        return self._order.get(criterion, len(self._order))

    def ordered(self, results: Iterable[BatchResult]) -> BatchResults:
        """A list in item order, then in the order the criteria were given."""
        out = BatchResults(sorted(results, key=lambda r: (r.index, self.position(r.criterion))))
        failed = sum(1 for r in out if r.error is not None)
        if failed:
            _log.warning(
                "%d of %d evaluations failed; each failed result carries its .error",
                failed,
                len(out),
            )
        return out

    def expand(self, job: Job) -> Iterator[Pending | BatchResult]:
        """The job's requests, or one failed result per criterion for an unusable item."""
        wanted = self.criteria if job.criteria is None else list(job.criteria)
        item_id: str | None = None
        metadata: dict[str, Any] | None = None
        error = job.error
        requests: Sequence[Request] = ()
        if error is None and wanted:
            try:
                fields = convert.to_item(job.item)
                item_id = _item_id(fields.get("id"))
                metadata = _metadata(fields.get("metadata"))  # a failed item keeps it too
                _check_fields(fields)
                if job.criteria is None and fields.get("criteria") is not None:
                    wanted = self._chosen(fields["criteria"])
                requests = self._requests(fields, wanted) if wanted else ()
            except Exception as exc:  # a bad item is recorded, never fatal
                error = exc
        copies = _copies(metadata, len(wanted))
        if error is not None:
            for criterion, meta in zip(wanted, copies, strict=True):
                yield BatchResult(job.index, criterion, item_id, None, error, meta)
            return
        for criterion, request, meta in zip(wanted, requests, copies, strict=True):
            yield Pending(job.index, criterion, item_id, request, meta)

    def _chosen(self, value: Any) -> list[str]:
        """An item's ``criteria``: the ones it still needs, in the run's order."""
        chosen = [value] if isinstance(value, str) else value
        if not isinstance(chosen, (list, tuple)):
            raise ComposoValidationError(
                f"criteria: expected a list of this run's criteria, got {type(value).__name__}"
            )
        for c in chosen:
            if c not in self._order:
                raise ComposoValidationError(
                    f"criteria: {str(c)[:60]!r} is not one of this run's criteria; an item's "
                    "criteria choose among those the run was given"
                )
        return sorted(set(chosen), key=self.position)

    def _requests(self, fields: Mapping[str, Any], wanted: list[str]) -> Sequence[Request]:
        criteria, names = (None, wanted) if self.by_name else (wanted, None)
        options = merge(self.options, {k: fields[k] for k in OPTION_NAMES if k in fields})
        if fields.get("trace") is not None:
            extra = [k for k in CONVERSATION_FIELDS if k in fields]
            if extra:
                raise ComposoValidationError(
                    f"item: {extra[0]!r} cannot be combined with 'trace'; an item is either a "
                    "conversation or a trace"
                )
            return build.trace_requests(criteria, names, options, trace=fields["trace"])
        return build.reward_requests(
            criteria, names, options, **{k: fields.get(k) for k in CONVERSATION_FIELDS}
        )


def _check_fields(fields: Mapping[str, Any]) -> None:
    """Refuse a field that would be neither sent nor given back (a misspelt one above all)."""
    unknown = [k for k in fields if k not in ITEM_FIELDS]
    if not unknown:
        return
    import difflib

    close = difflib.get_close_matches(str(unknown[0]), ITEM_FIELDS, n=1, cutoff=0.75)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    raise ComposoValidationError(f"item: unknown field {unknown[0]!r}{hint}; {_ITEM_HINT}")


def _metadata(value: Any) -> dict[str, Any] | None:
    """The item's ``metadata``, copied: the caller's object is never handed back or changed."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise ComposoValidationError(
            f"metadata: expected a dict of your own fields (given back on each result, never "
            f"sent), got {type(value).__name__}; wrap it, e.g. {{'note': value}}"
        )
    try:
        return copy.deepcopy(dict(value))
    except Exception as exc:
        raise ComposoValidationError(
            f"metadata: cannot be copied ({type(exc).__name__}: {exc}); keep plain values in it "
            "(text, numbers, lists, dicts)"
        ) from None


def _copies(metadata: dict[str, Any] | None, n: int) -> list[dict[str, Any] | None]:
    """One copy per result: results share no dict with the caller nor with each other."""
    if metadata is None:
        return [None] * n
    return [metadata, *(copy.deepcopy(metadata) for _ in range(n - 1))]


def _item_id(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, (str, int)) and not isinstance(value, bool):
        return str(value)
    raise ComposoValidationError(f"id: expected a string or an integer, got {type(value).__name__}")


def jobs_from(items: Iterable[Any]) -> Iterator[Job]:
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
    """Counts finished pairs and shows them: the caller's ``callback(done, total)``, or for
    ``progress=True`` the display a plugin offers (rich's bar, from :mod:`composo._display`)."""

    def __init__(self, option: bool | ProgressCallback, total: int | None) -> None:
        self.done = 0
        self.total = total
        self.status: Callable[[], str | None] | None = None
        """A note the bar shows beside "evaluating" (the pace when throttled)."""
        self._callback = option if callable(option) else None
        self._bar: Any = None
        self._started = False
        if option and self._callback is None:
            # Asked now, so a missing extra is reported before any request is made.
            self._bar = get_plugin_manager().hook.composo_progress_bar(total=total)
            if self._bar is None:
                raise ComposoError("progress=True: no plugin offers a progress display")

    def start(self) -> None:
        if self._bar is not None and not self._started:
            self._bar.start()
            self._started = True

    def advance(self) -> None:
        self.done += 1
        if self._callback is not None:
            self._callback(self.done, self.total)
        elif self._started:
            self._bar.update(self.done, self.status() if self.status is not None else None)

    def close(self) -> None:
        if self._started:
            self._bar.close()
            self._started = False


def finished(p: Pending, response: Any = None, error: BaseException | None = None) -> BatchResult:
    return BatchResult(p.index, p.criterion, p.id, response, error, p.metadata)


def tick(progress: Progress | None) -> None:
    if progress is not None:
        progress.advance()


def setup(
    limit: int,
    options: Mapping[str, Any],
    items: Any,
    criteria: Any,
    evaluator_name: Any,
    concurrency: int | None,
    progress: bool | ProgressCallback,
) -> tuple[Plan, int, Progress | None]:
    """Everything ``evaluate_many`` checks before the first request: the items are iterable, the
    criteria and options are valid, the concurrency is sane, the progress bar can be shown."""
    check_items(items)
    plan = Plan.create(criteria, evaluator_name, options)
    window = window_size(concurrency, limit)
    if not progress:
        return plan, window, None
    try:
        total: int | None = len(items) * len(plan.criteria)
    except TypeError:
        total = None
    return plan, window, Progress(progress, total)


class BatchResults(list[BatchResult]):
    """The results of ``evaluate_many``: a list, which also converts to a table."""

    def summary(self) -> dict[str, dict[str, Any]]:
        """Per criterion, in order: ``count``, ``scored``, ``not_applicable``, ``failed`` and the
        ``mean`` score of the scored pairs (``None`` if none)."""
        out: dict[str, dict[str, Any]] = {}
        for r in self:
            s = out.setdefault(
                r.criterion,
                {"count": 0, "scored": 0, "not_applicable": 0, "failed": 0, "total": 0.0},
            )
            s["count"] += 1
            if r.error is not None:
                s["failed"] += 1
            elif r.score is None:
                s["not_applicable"] += 1
            else:
                s["scored"] += 1
                s["total"] += r.score
        for s in out.values():
            total = s.pop("total")
            s["mean"] = total / s["scored"] if s["scored"] else None
        return out

    def __repr__(self) -> str:
        scores = [r.score for r in self if r.score is not None]
        failed = sum(1 for r in self if r.error is not None)
        mean = score_text(sum(scores) / len(scores)) if scores else "n/a"
        criteria = len({r.criterion for r in self})
        return (
            f"BatchResults({len(self)} results, {criteria} criteria, {failed} failed, "
            f"mean score {mean})"
        )

    def _repr_html_(self) -> str | None:
        return repr_html(self)

    def to_pandas(self) -> Any:
        """A pandas DataFrame, one row per (item, criterion): ``index``, ``id``, ``criterion``,
        ``score``, ``explanation``, ``error``, ``metadata`` (each item's dict, or ``None``)
        (needs the ``pandas`` extra)."""
        return _table(self, "pandas")

    def to_polars(self) -> Any:
        """A polars DataFrame with the columns of :meth:`to_pandas`; ``metadata`` holds each
        item's dict as it is (an object column: a struct would be guessed from the first rows
        and could drop the keys of later ones) (needs the ``polars`` extra)."""
        return _table(self, "polars")


def frame_library(kind: str) -> Any:
    """The ``pandas`` or ``polars`` module, imported only when a table is asked for."""
    import importlib

    try:
        return importlib.import_module(kind)
    except ImportError:
        raise ImportError(f"to_{kind}() needs {kind}: pip install 'composo[{kind}]'") from None


def _table(results: Sequence[BatchResult], kind: str) -> Any:
    """Batch results as a long table, one row per (item, criterion)."""
    library = frame_library(kind)
    columns = ("index", "id", "criterion", "score", "explanation", "error", "metadata")
    rows = [r.row() for r in results]
    data = {c: [row[c] for row in rows] for c in columns}
    if kind == "pandas":
        frame = library.DataFrame(data, columns=list(columns))
        frame["score"] = frame["score"].astype("float64")
        return frame
    pl = library
    types = (pl.Int64, pl.Utf8, pl.Utf8, pl.Float64, pl.Utf8, pl.Utf8, pl.Object)
    return pl.DataFrame(data, schema=dict(zip(columns, types, strict=True)))
