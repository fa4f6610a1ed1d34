"""How results show to people: rich's progress bar and the HTML a notebook renders, as the
``composo_progress_bar`` and ``composo_repr_html`` hooks (the core draws nothing itself).
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from composo._core.plugins import hookimpl
from composo._core.responses import score_text, short
from composo.errors import ComposoError

if TYPE_CHECKING:
    from composo._core.plan import BatchResult, BatchResults
    from composo._core.responses import EvaluationResponse, MultiAgentTraceResponse

HTML_ROWS = 50
"""Rows a notebook shows of a batch before it says how many more there are."""


class RichBar:
    """rich's progress bar on stderr, described "evaluating (note)"."""

    def __init__(self, total: int | None) -> None:
        try:
            from rich import progress
            from rich.console import Console
        except ImportError:
            raise ComposoError(
                "progress=True needs the rich package: pip install 'composo[cli]'"
            ) from None
        self._total = total
        self._task: Any = None
        self._bar = progress.Progress(
            progress.TextColumn("[progress.description]{task.description}"),
            progress.BarColumn(),
            progress.MofNCompleteColumn(),
            progress.TimeElapsedColumn(),
            progress.TimeRemainingColumn(),
            console=Console(stderr=True),
        )

    def start(self) -> None:
        self._bar.start()
        self._task = self._bar.add_task("evaluating", total=self._total)

    def update(self, done: int, note: str | None) -> None:
        description = f"evaluating ({note})" if note else "evaluating"
        self._bar.update(self._task, completed=done, description=description)

    def close(self) -> None:
        self._bar.stop()


@hookimpl(trylast=True)
def composo_progress_bar(total: int | None) -> RichBar:
    return RichBar(total)


@hookimpl(trylast=True)
def composo_repr_html(obj: Any) -> str | None:
    # imported here: the plugin manager loads this module, and most runs never render HTML
    from composo._core.plan import BatchResult, BatchResults
    from composo._core.responses import EvaluationResponse, MultiAgentTraceResponse

    if isinstance(obj, EvaluationResponse):
        return _evaluation(obj)
    if isinstance(obj, MultiAgentTraceResponse):
        return _trace(obj)
    if isinstance(obj, BatchResult):
        return _pair(obj)
    if isinstance(obj, BatchResults):
        return _batch(obj)
    return None


def _text(text: object) -> str:
    """``text`` inert inside HTML (markup, quotes and all); line breaks kept."""
    return html.escape(str(text), quote=True).replace("\n", "<br>")


def _card(title: str, score: float | None, body: list[tuple[str, str]], judge: Any) -> str:
    """A result as a small block: a title, the score large, then labelled lines."""
    if judge is not None:
        body = [*body, ("judge", str(judge))]
    rows = "".join(
        f"<tr><th style='text-align:left;padding-right:1em;vertical-align:top'>"
        f"{_text(k)}</th><td style='text-align:left'>{_text(v)}</td></tr>"
        for k, v in body
    )
    return (
        f"<div class='composo-result'><div><b>{_text(title)}</b> "
        f"<span style='font-size:1.4em'>{_text(score_text(score))}</span></div>"
        f"<table>{rows}</table></div>"
    )


def _evaluation(r: EvaluationResponse) -> str:
    body = [("criterion", r.criterion)] if r.criterion is not None else []
    body.append(("explanation", r.explanation or "(none)"))
    if r.score is None:
        body.append(("note", "the criterion did not apply to this conversation"))
    return _card("score", r.score, body, r.provenance)


def _trace(r: MultiAgentTraceResponse) -> str:
    body = [("criterion", r.criterion)] if r.criterion is not None else []
    for name, agent in r.results_by_agent_name.items():
        instances = agent.results_by_agent_instance_id
        for instance_id, res in instances.items():
            label = name if len(instances) == 1 else f"{name} ({instance_id})"
            body.append(
                (label, "n/a" if res is None else f"{score_text(res.score)}: {res.explanation}")
            )
    return _card("overall score", r.overall_score, body, r.provenance)


def _pair(r: BatchResult) -> str:
    from composo._core.plan import error_text  # loaded already: r is a BatchResult

    body = [("item", r.id if r.id is not None else f"#{r.index}"), ("criterion", r.criterion)]
    if r.error is not None:
        body.append(("error", error_text(r.error)))
    else:
        body.append(("explanation", r.explanation or "(none)"))
    return _card("score", r.score, body, r.provenance)


def _cells(values: tuple[object, ...], tag: str = "td") -> str:
    return "".join(f"<{tag} style='text-align:left'>{_text(v)}</{tag}>" for v in values)


def _table(head: tuple[str, ...], rows: Sequence[tuple[object, ...]]) -> str:
    body = "".join(f"<tr>{_cells(r)}</tr>" for r in rows)
    return f"<table><tr>{_cells(head, 'th')}</tr>{body}</table>"


def _batch(results: BatchResults) -> str:
    """A summary per criterion, then the first rows as a table."""
    from composo._core.plan import error_text

    summary = [
        (short(c, 80), s["count"], score_text(s["mean"]), s["not_applicable"], s["failed"])
        for c, s in results.summary().items()
    ]
    rows = [
        (
            r.index,
            "" if r.id is None else r.id,
            short(r.criterion, 60),
            score_text(r.score) if r.error is None else "error",
            short(error_text(r.error) if r.error is not None else r.explanation, 200),
        )
        for r in results[:HTML_ROWS]
    ]
    more = (
        f"<p>showing {HTML_ROWS} of {len(results)} results; to_pandas() has them all</p>"
        if len(results) > HTML_ROWS
        else ""
    )
    return (
        f"<div class='composo-batch'><p><b>{len(results)} results</b></p>"
        + _table(("criterion", "count", "mean", "n/a", "failed"), summary)
        + _table(("index", "id", "criterion", "score", "explanation / error"), rows)
        + f"{more}</div>"
    )
