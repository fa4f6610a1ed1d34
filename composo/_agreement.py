"""How well the judge agrees with people's labels: for reward criteria, rank correlation (Spearman,
Kendall, with seeded bootstrap intervals) and mean absolute error; for pass/fail criteria,
agreement beyond chance (accuracy, Cohen's kappa, a confusion table). Standard library only.
"""

from __future__ import annotations

import bisect
import contextlib
import math
import random
import statistics
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar

RESAMPLES = 2000
T = TypeVar("T")
_TRUE = {"1", "true", "pass", "passed", "yes", "y", "good"}
_FALSE = {"0", "false", "fail", "failed", "no", "n", "bad"}


class LabelError(ValueError):
    """A labels file or value that cannot be used; the message names the line and field."""


# -- rank statistics ----------------------------------------------------------------------------


def _ranks(values: Sequence[float]) -> list[float]:
    """Ranks from 1, ties sharing their average rank."""
    order = sorted(values)
    return [(bisect.bisect_left(order, v) + bisect.bisect_right(order, v) + 1) / 2 for v in values]


def spearman(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Spearman's rank correlation (Pearson's on average ranks); ``None`` when undefined (fewer
    than two pairs, or one side constant: no ranking to agree with)."""
    try:
        return max(-1.0, min(1.0, statistics.correlation(_ranks(x), _ranks(y))))
    except statistics.StatisticsError:
        return None


def _tied_pairs(values: Iterable[Any]) -> int:
    return sum(c * (c - 1) // 2 for c in Counter(values).values())


def kendall_tau(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Kendall's tau-b (ties in either side accounted for): pairs sorted by ``x`` then ``y``, the
    discordant ones counted as the swaps that would sort ``y``."""
    n = len(x)
    if n < 2:
        return None
    pairs = sorted(zip(x, y, strict=True))
    total = n * (n - 1) // 2
    ties_x = _tied_pairs(p[0] for p in pairs)
    ties_y = _tied_pairs(p[1] for p in pairs)
    ties_xy = _tied_pairs(pairs)
    swaps = _swaps([p[1] for p in pairs])
    denominator = math.sqrt((total - ties_x) * (total - ties_y))
    if denominator == 0.0:
        return None
    concordant_minus_discordant = total - ties_x - ties_y + ties_xy - 2 * swaps
    return max(-1.0, min(1.0, concordant_minus_discordant / denominator))


def _swaps(values: list[float]) -> int:
    """How many pairs are out of order (strictly): each value against the sorted ones before it."""
    seen: list[float] = []
    swaps = 0
    for value in values:
        swaps += len(seen) - bisect.bisect_right(seen, value)
        bisect.insort(seen, value)
    return swaps


def bootstrap(
    values: Sequence[T],
    statistic: Callable[[Sequence[T]], float | None],
    seed: int,
    resamples: int = RESAMPLES,
    level: float = 0.95,
) -> tuple[float, float] | None:
    """Percentile bootstrap interval of ``statistic`` over resamples of ``values`` (same seed,
    same interval). Resamples where it is undefined are left out; under half defined: ``None``."""
    rng = random.Random(seed)
    drawn = (statistic(rng.choices(values, k=len(values))) for _ in range(resamples))
    found = sorted(v for v in drawn if v is not None)
    if len(found) < resamples // 2:
        return None
    tail = (1.0 - level) / 2.0
    lo = found[max(0, math.floor(tail * len(found)))]
    hi = found[min(len(found) - 1, math.ceil((1.0 - tail) * len(found)) - 1)]
    return (lo, hi)


def _interval(
    pairs: Sequence[tuple[float, float]],
    statistic: Callable[[Sequence[float], Sequence[float]], float | None],
    seed: int,
    resamples: int,
) -> tuple[float, float] | None:
    """A rank correlation's interval; none under three pairs."""
    if len(pairs) < 3:
        return None
    return bootstrap(
        pairs, lambda d: statistic([p[0] for p in d], [p[1] for p in d]), seed, resamples
    )


# -- the result ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Disagreement:
    """One item where the judge and a person differ."""

    id: str
    criterion: str
    judge: float
    human: float
    comment: str | None = None

    @property
    def gap(self) -> float:
        return abs(self.judge - self.human)


@dataclass(frozen=True)
class Confusion:
    """Pass/fail counts: the judge's verdict against the person's."""

    both_pass: int
    judge_pass_human_fail: int
    judge_fail_human_pass: int
    both_fail: int


@dataclass(frozen=True)
class CriterionAgreement:
    """Agreement on one criterion over the ``n`` items both the judge scored and a person
    labelled. Reward criteria fill the rank figures, pass/fail ones the verdict figures."""

    criterion: str
    kind: Literal["reward", "pass/fail"]
    n: int
    mean_absolute_error: float | None
    spearman: float | None = None
    spearman_interval: tuple[float, float] | None = None
    kendall: float | None = None
    kendall_interval: tuple[float, float] | None = None
    accuracy: float | None = None
    kappa: float | None = None
    confusion: Confusion | None = None
    disagreements: tuple[Disagreement, ...] = ()  # the largest first


@dataclass(frozen=True)
class Agreement:
    """Per criterion, how the judge agrees with the labels; plus what could not be paired."""

    criteria: tuple[CriterionAgreement, ...]
    unmatched_labels: int  # labels naming an item or criterion the results do not hold
    not_scored: int  # labelled items the judge did not score (not applicable, or an error)
    rows_set_aside: int = 0  # rows of the results file that are not results

    def __getitem__(self, criterion: str) -> CriterionAgreement:
        for c in self.criteria:
            if c.criterion == criterion:
                return c
        raise KeyError(criterion)


# -- labels -------------------------------------------------------------------------------------


def _label_value(raw: Any, where: str) -> float | None:
    """A label as a number from 0 to 1 (pass/fail words allowed); ``None`` when blank."""
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return None
    if isinstance(raw, bool):
        return 1.0 if raw else 0.0
    if isinstance(raw, str):
        word = raw.strip().lower()
        if word in _TRUE:
            return 1.0
        if word in _FALSE:
            return 0.0
        with contextlib.suppress(ValueError):  # else refused below, as it was written
            raw = float(word)
    if not isinstance(raw, (int, float)) or not math.isfinite(raw) or not 0.0 <= raw <= 1.0:
        raise LabelError(f"{where}: label {raw!r} is not a score from 0 to 1 or pass/fail")
    return float(raw)


def _label_rows(path: Path) -> Iterable[tuple[int, Mapping[str, Any]]]:
    suffix = path.suffix.lower()
    if suffix in (".parquet", ".pq"):
        try:
            import pyarrow.parquet as pq
        except ImportError:
            raise LabelError(
                f"{path.name}: reading Parquet labels needs pyarrow: pip install 'composo[parquet]'"
            ) from None
        yield from enumerate(pq.read_table(path).to_pylist(), 1)
    elif suffix == ".csv":
        import csv

        with path.open(newline="", encoding="utf-8") as f:
            yield from enumerate(csv.DictReader(f), 2)  # line 1 is the header
    else:
        import json

        with path.open("rb") as f:
            for n, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    value = json.loads(line)
                except ValueError:
                    raise LabelError(f"{path.name} line {n}: not valid JSON") from None
                if not isinstance(value, dict):
                    raise LabelError(f"{path.name} line {n}: not a JSON object")
                yield n, value


def read_labels(path: Path | str) -> list[dict[str, Any]]:
    """A labels file (CSV, JSONL or Parquet with ``id``, ``criterion``, ``label`` and an
    optional ``comment``; the review file ``composo view`` writes is one) as records; a later
    label for the same item and criterion replaces an earlier one (a review changed its mind)."""
    path = Path(path)
    if not path.is_file():
        raise LabelError(f"--labels: no such file: {path}")
    out: dict[tuple[str, str | None], dict[str, Any]] = {}
    for n, record in _label_rows(path):
        where = f"{path.name} line {n}"
        ident = record.get("id")
        if ident is None or (isinstance(ident, str) and not ident.strip()):
            raise LabelError(f"{where}: no id (each label names the item's id)")
        criterion = record.get("criterion")
        if criterion is not None and not isinstance(criterion, str):
            raise LabelError(f"{where}: criterion {criterion!r} is not text")
        if "label" not in record:
            raise LabelError(f"{where}: no label field (a score from 0 to 1, or pass/fail)")
        comment = record.get("comment")
        out[(str(ident), criterion or None)] = {
            "id": str(ident),
            "criterion": criterion or None,
            "label": _label_value(record.get("label"), where),
            "comment": comment if isinstance(comment, str) and comment else None,
        }
    return list(out.values())


# -- pairing and the figures --------------------------------------------------------------------


def _criterion_of(name: str | None, criteria: Sequence[str], library: Mapping[str, str]) -> str:
    if name is None:
        return criteria[0] if len(criteria) == 1 else ""
    return library.get(name, name)


def agreement(
    results: Path | str | Iterable[Mapping[str, Any]],
    labels: Path | str | Iterable[Mapping[str, Any]],
    *,
    seed: int = 0,
    resamples: int = RESAMPLES,
    worst: int = 10,
) -> Agreement:
    """How well the judge's scores in ``results`` (a results file, or its rows) agree with
    ``labels`` (a labels file, or records with ``id``, ``criterion``, ``label``). Labels name
    the criterion by its text or its library name; a labels file without criteria fits a run of
    one criterion. Raises :class:`LabelError` for a label that is not a score or pass/fail."""
    from composo._core.wire import is_binary

    if resamples < 100:
        raise ValueError(f"resamples={resamples}: use at least 100")
    from composo.cli._results import item_keys, read_results, row_problem

    rows: list[Mapping[str, Any]]
    if isinstance(results, (str, Path)):
        found, checked = read_results(Path(results))
        rows, set_aside = list(found), checked.bad
    else:
        given = list(results)
        rows = [r for r in given if row_problem(dict(r)) is None]
        set_aside = len(given) - len(rows)
    if isinstance(labels, (str, Path)):
        records = read_labels(labels)
    else:
        records = [
            {**r, "label": _label_value(r.get("label"), f"labels[{i}]")}
            for i, r in enumerate(labels)
        ]
    keys = item_keys(rows)
    by_pair = {(k, str(r["criterion"])): (k, r) for k, r in zip(keys, rows, strict=True)}
    criteria = list(dict.fromkeys(str(r["criterion"]) for r in rows))
    from composo import criteria as library_module

    library = {n: getattr(library_module, n) for n in library_module.__all__ if n.islower()}
    paired: dict[str, list[tuple[str, float, float, str | None]]] = {c: [] for c in criteria}
    unmatched = not_scored = 0
    for record in records:
        if record["label"] is None:
            continue  # a comment without a score
        criterion = _criterion_of(record.get("criterion"), criteria, library)
        hit = by_pair.get((str(record["id"]), criterion))
        if hit is None:
            unmatched += 1
            continue
        key, row = hit
        score = row.get("score")
        if row.get("error") is not None or score is None:
            not_scored += 1
            continue
        paired[criterion].append((key, float(score), record["label"], record.get("comment")))
    out = [
        _figures(c, pairs, is_binary(c), seed, resamples, worst)
        for c, pairs in paired.items()
        if pairs
    ]
    return Agreement(tuple(out), unmatched, not_scored, set_aside)


def _figures(
    criterion: str,
    pairs: list[tuple[str, float, float, str | None]],
    binary: bool,
    seed: int,
    resamples: int,
    worst: int,
) -> CriterionAgreement:
    pairs.sort(key=lambda p: p[0])
    judge = [p[1] for p in pairs]
    human = [p[2] for p in pairs]
    n = len(pairs)
    mae = math.fsum(abs(a - b) for a, b in zip(judge, human, strict=True)) / n
    apart = sorted(
        (p for p in pairs if abs(p[1] - p[2]) > 1e-9), key=lambda p: (-abs(p[1] - p[2]), p[0])
    )
    shown = tuple(Disagreement(k, criterion, j, h, c) for k, j, h, c in apart[: max(worst, 0)])
    if not binary:
        both = list(zip(judge, human, strict=True))
        return CriterionAgreement(
            criterion,
            "reward",
            n,
            mae,
            spearman=spearman(judge, human),
            spearman_interval=_interval(both, spearman, seed, resamples),
            kendall=kendall_tau(judge, human),
            kendall_interval=_interval(both, kendall_tau, seed, resamples),
            disagreements=shown,
        )
    verdicts = Counter((a >= 0.5, b >= 0.5) for a, b in zip(judge, human, strict=True))
    table = Confusion(
        *(verdicts[p] for p in ((True, True), (True, False), (False, True), (False, False)))
    )
    accuracy = (table.both_pass + table.both_fail) / n
    pj = (table.both_pass + table.judge_pass_human_fail) / n
    ph = (table.both_pass + table.judge_fail_human_pass) / n
    chance = pj * ph + (1 - pj) * (1 - ph)
    kappa = None if chance >= 1.0 else (accuracy - chance) / (1.0 - chance)
    return CriterionAgreement(
        criterion,
        "pass/fail",
        n,
        mae,
        accuracy=accuracy,
        kappa=kappa,
        confusion=table,
        disagreements=shown,
    )
