"""Tables in, tables out: DataFrames, Hugging Face datasets and file rows mapped to conversations
by column name (:func:`row_item`, the one place a row becomes an item), scored, and given back
as columns. pandas, polars and datasets are imported only when their object is passed.
"""

from __future__ import annotations

import inspect
import json
import math
import re
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from composo.errors import ComposoValidationError

ROLES = ("messages", "question", "answer", "context", "system", "tools", "id", "tags")
"""What a column can hold; by default each is read from the column of the same name."""
FILE_ROLES = (*ROLES, "metadata")
"""A file's roles: ``metadata`` too, given back on each result row (a DataFrame's columns all
come back unchanged, so it has no such role)."""
_NON_BLANK = ("question", "answer")  # blank text there is a missing question or answer
_OPTIONAL = ("context", "system", "tools", "id", "tags", "metadata")
_LOOKALIKES = {
    "question": ("question", "prompt", "input", "query", "user", "instruction"),
    "answer": ("answer", "response", "output", "completion", "reply", "assistant"),
}
Spelling = Callable[[str, str], str]
Where = int | str
"""A row's place in messages: a table's 0-based row position, or a label such as ``"line 5"``."""


def _at(row: Where) -> str:
    return f"row {row}" if isinstance(row, int) else row


def _found(value: Any) -> str:
    """What a cell holds, for a message: ``an empty cell``, ``an empty string``, ``an int``."""
    if _empty(value):
        return "an empty cell"
    if isinstance(value, str):
        return "only whitespace" if value else "an empty string"
    name = type(value).__name__
    return f"{'an' if name[:1].lower() in 'aeiou' else 'a'} {name}"


def python_spelling(role: str, column: str) -> str:
    """A mapping as ``evaluate_dataframe(columns=...)`` takes it: ``answer='reply'``."""
    return f"{role}={column!r}"


def flag_spelling(role: str, column: str) -> str:
    """A mapping as ``composo evaluate`` takes it: ``--answer-column reply``."""
    return f"--{role}-column {column}"


def _guess(role: str, names: Sequence[str], taken: set[str]) -> str | None:
    """The table's column most like what ``role`` usually holds."""
    import difflib

    lowered = {n.lower(): n for n in names if n not in taken}
    wanted = _LOOKALIKES.get(role, (role,))
    for word in wanted:
        close = difflib.get_close_matches(word, list(lowered), n=1, cutoff=0.75)
        if close:
            return lowered[close[0]]
    for word in wanted:  # model_output, user_prompt...
        inside = [name for low, name in lowered.items() if word in low]
        if inside:
            return inside[0]
    return None


def _mapping_hint(names: Sequence[str], spell: Spelling) -> str:
    """A mapping to try, made of columns the table really has (never made-up names)."""
    taken: set[str] = set()
    chosen: list[tuple[str, str]] = []
    for role in ("question", "answer"):
        column = _guess(role, names, taken)
        if column is not None:
            taken.add(column)
            chosen.append((role, column))
    if spell is python_spelling:
        example = "columns={" + ", ".join(f"{r!r}: {c!r}" for r, c in chosen) + "}"
        fallback = "columns={'question': NAME, 'answer': NAME}"
    else:
        example = " ".join(spell(r, c) for r, c in chosen)
        fallback = f"{spell('question', 'NAME')} {spell('answer', 'NAME')}"
    return f"name the columns that hold them: {example if chosen else fallback}"


def _empty(value: Any) -> bool:
    """A missing cell: ``None``, NaN, pandas' ``NA``/``NaT``."""
    if value is None:
        return True
    if isinstance(value, float):
        return math.isnan(value)
    return type(value).__name__ in ("NAType", "NaTType")


def _plain(value: Any) -> Any:
    """numpy scalars and arrays (what pandas and Arrow hand out) as Python values."""
    if isinstance(value, (str, bytes, dict, list)):
        return value
    if hasattr(value, "tolist") and callable(value.tolist):
        return value.tolist()
    if hasattr(value, "item") and callable(value.item) and not isinstance(value, Mapping):
        return value.item()
    return value


def plain_id(value: Any) -> str | int | None:
    """An id cell as an id (text, or an integer: a whole float from a column with blanks)."""
    value = _plain(value)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return value if isinstance(value, (str, int)) and not isinstance(value, bool) else None


@dataclass(frozen=True)
class ColumnMap:
    """Role (:data:`ROLES`, :data:`FILE_ROLES`) -> the table's column that holds it."""

    columns: Mapping[str, str] = field(default_factory=dict)
    flags: bool = False  # named with the command line's flags (--answer-column), in messages

    @classmethod
    def resolve(
        cls,
        given: Mapping[str, str] | None,
        available: Sequence[str],
        spell: Spelling = python_spelling,
        roles: Sequence[str] = ROLES,
    ) -> ColumnMap:
        """Check ``given`` against the table's columns and fill in the default names; messages
        write a mapping as the caller does (``spell``: ``columns=`` or the command line's flags).

        Raises:
            ComposoValidationError: An unknown role, a named column the table lacks, or neither
                a messages column nor question and answer columns.
        """
        given = dict(given or {})
        names = list(available)
        for role, column in given.items():
            _check_mapping(role, column, names, spell, roles)
        chosen = {role: given.get(role, role) for role in roles}
        chosen = {role: col for role, col in chosen.items() if col in names}
        if "messages" in given:
            chosen = {r: c for r, c in chosen.items() if r not in ("question", "answer", "context")}
        elif "messages" in chosen and ("question" in given or "answer" in given):
            del chosen["messages"]
        missing = [r for r in ("question", "answer") if r not in chosen]
        if "messages" not in chosen and missing:
            raise ComposoValidationError(
                f"no 'messages' column and no {' or '.join(map(repr, missing))} column; "
                f"this table has {_listing(names)}; {_mapping_hint(names, spell)}"
            )
        return cls(chosen, spell is flag_spelling)

    def cell(self, role: str, row: Where) -> str:
        """A cell's place for a message: the row, the column and the flag that names it."""
        flag = f" (--{role}-column)" if self.flags else ""
        return f"{_at(row)}, column {self.columns[role]!r}{flag}"

    def required(self) -> list[str]:
        return list(self.columns.values())

    def item(self, cells: Mapping[str, Any], row: Where) -> dict[str, Any]:
        """One row's item for the batch engine (``cells``: column -> value)."""
        return row_item({role: cells.get(col) for role, col in self.columns.items()}, self, row)

    def metadata(self, cells: Mapping[str, Any]) -> dict[str, Any] | None:
        """The row's metadata cell, if it has a usable one (for a row that failed)."""
        column = self.columns.get("metadata")
        if column is None or _empty(_plain(cells.get(column))):
            return None
        try:
            return _metadata(cells.get(column), self, "")
        except ComposoValidationError:
            return None

    def ident(self, cells: Mapping[str, Any]) -> str | None:
        """The row's id cell as text, if it has a usable one (for a row that failed)."""
        column = self.columns.get("id")
        ident = None if column is None else plain_id(cells.get(column))
        return None if ident is None else str(ident)


def _check_mapping(
    role: str, column: object, names: list[str], spell: Spelling, roles: Sequence[str]
) -> None:
    """One ``role -> column`` the caller gave: a role that may be read, a column the table has."""
    if role == "metadata" and role not in roles:
        raise ComposoValidationError(
            "columns: 'metadata' is not read from a DataFrame: every column of the "
            "table comes back unchanged in the result, so drop it from columns="
        )
    if role not in roles:
        raise ComposoValidationError(
            f"columns: unknown role {role!r}; the roles are {', '.join(roles)}"
        )
    if isinstance(column, str) and column in names:
        return
    import difflib

    close = difflib.get_close_matches(str(column), names, n=1, cutoff=0.6)
    hint = f" (did you mean {spell(role, close[0])}?)" if close else ""
    lead = "columns: " if spell is python_spelling else ""
    raise ComposoValidationError(
        f"{lead}{spell(role, str(column))} is not a column of this table{hint}; its "
        f"columns are {_listing(names)}"
    )


def _listing(names: Sequence[str]) -> str:
    shown = ", ".join(repr(n) for n in names[:20])
    return shown + (f" and {len(names) - 20} more" if len(names) > 20 else "") if names else "none"


def _text(value: Any, role: str, mapping: ColumnMap, row: Where) -> str:
    value = _plain(value)
    if isinstance(value, list) and role == "context" and all(isinstance(v, str) for v in value):
        return "\n\n".join(value)
    if isinstance(value, str) and (value.strip() or role not in _NON_BLANK):
        return value
    raise ComposoValidationError(
        f"{mapping.cell(role, row)}: expected text, got {_found(value)}; fill it in or drop the row"
    )


def _structured(value: Any, role: str, mapping: ColumnMap, row: Where, kind: type[Any]) -> Any:
    """A list (messages, tools) or dict (tags) cell, or the JSON text of one (CSV cells)."""
    value = _plain(value)
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise ComposoValidationError(
                f"{mapping.cell(role, row)}: not valid JSON ({exc.msg} at character {exc.pos})"
            ) from None
    if kind is list and isinstance(value, tuple):
        value = list(value)
    if not isinstance(value, kind):
        want = "a list (or its JSON text)" if kind is list else "an object (or its JSON text)"
        raise ComposoValidationError(
            f"{mapping.cell(role, row)}: expected {want}, got {_found(value)}"
        )
    return [_clean(v) for v in value] if isinstance(value, list) else value


def _clean(value: Any) -> Any:
    """A list's entry: nested numpy values made plain, an Arrow struct's unset fields dropped."""
    value = _plain(value)
    if isinstance(value, dict):
        return {k: c for k, v in value.items() if (c := _clean(v)) is not None}
    return [_clean(v) for v in value] if isinstance(value, list) else value


def _metadata(value: Any, mapping: ColumnMap, row: Where) -> dict[str, Any]:
    """A file's metadata cell: an object (or its JSON text) the results file can hold as is."""
    meta: dict[str, Any] = _structured(value, "metadata", mapping, row, dict)
    try:
        json.dumps(meta, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ComposoValidationError(
            f"{mapping.cell('metadata', row)}: cannot be written as JSON "
            f"({exc}); store plain values (text, numbers, lists, objects) or JSON text"
        ) from None
    return meta


def row_item(values: Mapping[str, Any], mapping: ColumnMap, row: Where) -> dict[str, Any]:
    """Role -> cell value for one row, as an ``evaluate_many`` item.

    Raises:
        ComposoValidationError: A cell cannot be used, naming its row and column.
    """
    present = {r: v for r, v in values.items() if not (r in _OPTIONAL and _empty(_plain(v)))}
    item: dict[str, Any] = {}
    if "messages" in mapping.columns:
        item["messages"] = _structured(present.get("messages"), "messages", mapping, row, list)
    else:
        question = _text(present.get("question"), "question", mapping, row)
        answer = _text(present.get("answer"), "answer", mapping, row)
        if "context" in present:
            context = _text(present["context"], "context", mapping, row)
            question = f"Context:\n{context}\n\nQuestion:\n{question}"
        item["messages"] = [
            {"role": "user", "content": question},
            {"role": "assistant", "content": answer},
        ]
    if "system" in present:
        item["system"] = _text(present["system"], "system", mapping, row)
    if "tools" in present:
        item["tools"] = _structured(present["tools"], "tools", mapping, row, list)
    if "tags" in present:
        tags = _structured(present["tags"], "tags", mapping, row, dict)
        item["tags"] = {str(k): v if isinstance(v, str) else json.dumps(v) for k, v in tags.items()}
    if "metadata" in present:
        item["metadata"] = _metadata(present["metadata"], mapping, row)
    if "id" in present:
        ident = plain_id(present["id"])
        if ident is None:
            raise ComposoValidationError(
                f"{mapping.cell('id', row)}: expected a string or an integer id, got "
                f"{_found(_plain(present['id']))}"
            )
        item["id"] = ident
    return item


# -- frames -------------------------------------------------------------------------------------


def _kind(frame: Any) -> str:
    module = type(frame).__module__.split(".", 1)[0]
    if module in ("pandas", "polars", "datasets"):
        return module
    raise ComposoValidationError(
        f"df: expected a pandas or polars DataFrame or a datasets.Dataset, got "
        f"{type(frame).__name__}; for a list of dicts use evaluate_many()"
    )


def _column_values(frame: Any, kind: str, column: str) -> list[Any]:
    if kind == "pandas":
        return list(frame[column].tolist())
    if kind == "polars":
        return list(frame.get_column(column).to_list())
    return list(frame[column])


def _slug(text: str) -> str:
    words = re.findall(r"[a-z0-9]+", text.lower())
    out = ""
    for word in words:
        if len(out) + len(word) + 1 > 40:
            break
        out = f"{out}_{word}" if out else word
    return out or "criterion"


def prefixes(labels: Sequence[str], names: Mapping[str, str] | None = None) -> dict[str, str]:
    """Criterion -> the prefix of its result columns (the caller's name, or a short slug)."""
    out: dict[str, str] = {}
    taken: set[str] = set()
    for label in labels:
        base = names[label] if names and label in names else _slug(label)
        name, n = base, 2
        while name in taken:
            name, n = f"{base}_{n}", n + 1
        taken.add(name)
        out[label] = name
    return out


@dataclass
class FrameJob:
    """One table to score: its rows as items, and the result columns filled as results arrive."""

    frame: Any
    kind: str
    mapping: ColumnMap
    criteria: list[str]
    names: dict[str, str]
    rows: int
    scores: dict[str, list[float | None]] = field(default_factory=dict)
    explanations: dict[str, list[str | None]] = field(default_factory=dict)
    errors: list[dict[str, str]] = field(default_factory=list)
    positions: list[int] = field(default_factory=list)

    @classmethod
    def create(
        cls,
        frame: Any,
        criteria: Sequence[str],
        columns: Mapping[str, str] | None,
        names: Mapping[str, str] | None = None,
    ) -> FrameJob:
        """Check the table's columns and the result columns' names before any request."""
        kind = _kind(frame)
        available = list(frame.column_names if kind == "datasets" else map(str, frame.columns))
        mapping = ColumnMap.resolve(columns, available)
        labels = list(criteria)
        chosen = prefixes(labels, names)
        job = cls(frame, kind, mapping, labels, chosen, len(frame))
        clash = [c for c in job.result_columns() if c in available]
        if clash:
            raise ComposoValidationError(
                f"df: the table already has a column {clash[0]!r}, which the results would "
                "replace; rename it, or name the criteria with a dict {name: criterion}"
            )
        for label in labels:
            job.scores[label] = [None] * job.rows
            job.explanations[label] = [None] * job.rows
        job.errors = [{} for _ in range(job.rows)]
        return job

    def result_columns(self) -> list[str]:
        kinds = ("score", "explanation")
        return [*(f"{self.names[c]}_{k}" for c in self.criteria for k in kinds), "error"]

    def items(self) -> Iterator[dict[str, Any]]:
        """The usable rows as items, in order; a row that cannot be used gets its error now."""
        used = self.mapping.columns
        cells = {col: _column_values(self.frame, self.kind, col) for col in used.values()}
        for row in range(self.rows):
            values = {role: cells[col][row] for role, col in used.items()}
            try:
                item = row_item(values, self.mapping, row)
            except ComposoValidationError as exc:
                for label in self.criteria:
                    self.errors[row][label] = f"{type(exc).__name__}: {exc}"
                continue
            self.positions.append(row)
            yield item

    def record(self, results: Sequence[Any]) -> None:
        """File batch results (``index`` is the position among the usable rows)."""
        from composo._core.plan import error_text

        for result in results:
            row = self.positions[result.index]
            if result.error is not None:
                self.errors[row][result.criterion] = error_text(result.error)
                continue
            self.scores[result.criterion][row] = result.score
            self.explanations[result.criterion][row] = result.explanation

    def error_column(self) -> list[str | None]:
        out: list[str | None] = []
        for errs in self.errors:
            if not errs:
                out.append(None)
            elif len(set(errs.values())) == 1 and len(errs) == len(self.criteria):
                out.append(next(iter(errs.values())))
            else:
                out.append("; ".join(f"{self.names[c]}: {e}" for c, e in errs.items()))
        return out

    def result(self) -> Any:
        """The input table with the result columns added (a new object; the input is unchanged)."""
        values = [v for c in self.criteria for v in (self.scores[c], self.explanations[c])]
        columns = zip(self.result_columns(), [*values, self.error_column()], strict=True)
        return attach(self.frame, self.kind, dict(columns))


def attach(frame: Any, kind: str, data: Mapping[str, list[Any]]) -> Any:
    """``frame`` with ``data`` as new columns; score columns are floats (missing: null/NaN)."""
    if kind == "pandas":
        import pandas as pd

        new = {
            name: pd.Series(
                values, index=frame.index, dtype="float64" if name.endswith("_score") else "object"
            )
            for name, values in data.items()
        }
        return frame.assign(**new)
    if kind == "polars":
        import polars as pl

        return frame.with_columns(
            [
                pl.Series(name, values, dtype=pl.Float64 if name.endswith("_score") else pl.Utf8)
                for name, values in data.items()
            ]
        )
    out = frame
    for name, values in data.items():
        out = out.add_column(name, values)
    return out


def _named(value: Any) -> tuple[Any, dict[str, str] | None]:
    """A ``{name: criterion}`` dict names the result columns; a list or string is passed on."""
    if isinstance(value, Mapping):
        return list(value.values()), {v: k for k, v in value.items()}
    return value, None


def plan_frame(
    criteria: Any, evaluator_name: Any, options: Mapping[str, Any]
) -> tuple[Any, Any, dict[str, str] | None, list[str]]:
    """A table's criteria or saved evaluators (either may be ``{name: criterion}``) and options,
    checked before any request: both as ``evaluate_many`` takes them, the result columns'
    names (from a dict) and the plan's criteria."""
    from composo._core.plan import Plan

    criteria, names = _named(criteria)
    evaluator_name, evaluator_names = _named(evaluator_name)
    plan = Plan.create(criteria, evaluator_name, options)
    return criteria, evaluator_name, evaluator_names or names, plan.criteria


def prepare(
    frame: Any,
    criteria: Any,
    evaluator_name: Any,
    columns: Mapping[str, str] | None,
    concurrency: int | None,
    progress: Any,
    options: Mapping[str, Any],
) -> tuple[FrameJob, dict[str, Any]]:
    """The table's job and the ``evaluate_many`` keyword arguments for it (its items aside), all
    checked before a request."""
    criteria, evaluator_name, names, labels = plan_frame(criteria, evaluator_name, options)
    job = FrameJob.create(frame, labels, columns, names)
    call = dict(criteria=criteria, evaluator_name=evaluator_name, **options)
    return job, {**call, "concurrency": concurrency, "progress": progress}


def evaluate_frame(client: Any, *arguments: Any) -> Any:
    """``evaluate_dataframe``: score every row, give back the table with result columns
    (``arguments`` are :func:`prepare`'s); on the async client, a coroutine."""
    job, call = prepare(*arguments)
    results = client.evaluate_many(job.items(), **call)
    if inspect.isawaitable(results):
        return _finish(job, results)
    job.record(results)
    return job.result()


async def _finish(job: FrameJob, results: Awaitable[Any]) -> Any:
    job.record(await results)
    return job.result()
