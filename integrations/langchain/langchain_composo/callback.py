"""``ComposoCallback``: evaluate LangChain model calls and whole agent runs as they happen."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.outputs import LLMResult

from composo import AsyncComposo, Composo, ComposoValidationError
from composo.ext import BackgroundEvaluator, EvaluationRecord, check_options
from langchain_composo.runs import Run, error_note, llm_evaluation, trace_of

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from composo.types import EvaluateOptions

__all__ = ["ComposoCallback", "EvaluationRecord"]

_log = logging.getLogger("langchain_composo")

Mode = Literal["llm", "trace"]


class ComposoCallback(BaseCallbackHandler):
    """A LangChain callback that sends what ran to Composo, in the background.

    ``mode="llm"`` scores every chat model call (input messages, tools offered, answer) against
    each criterion; ``mode="trace"`` scores each whole run, when its outermost run ends, as a
    multi-agent trace; a run that raised is evaluated too, with its exception as the last thing
    the judge sees. Use one instance for as many runs, threads and event loops as you like, or
    one per request: every callback shares the process's one background thread, and a dropped
    callback leaves nothing behind. ``with ComposoCallback(...) as cb:`` flushes and closes on
    exit; :meth:`close` does the same explicitly.

    ``results`` holds one :class:`EvaluationRecord` per criterion and evaluation; failures are
    logged and recorded there, never raised into a run unless ``raise_error=True``.

    Args:
        criteria: One criterion or several (``"Reward ..."``, ``"Penalize ..."``, ...).
        client: A ``Composo`` or ``AsyncComposo`` (default: one made from the environment).
        mode: ``"llm"`` (each chat model call) or ``"trace"`` (each whole run).
        on_result: Called with each :class:`EvaluationRecord` as it arrives (on a background
            thread).
        raise_error: Raise recorded failures from :meth:`flush` and the next run.
        evaluator_name: Saved evaluators to run, instead of ``criteria``.
        max_results: How many records ``results`` keeps (``None``: all).
        max_pending: How many evaluations may wait; beyond it new ones are skipped and
            recorded with a ``BacklogFullError``.
        **options: :class:`~composo.types.EvaluateOptions` for every evaluation (``tags``,
            ``model_core``...), checked as the clients check them; with ``mode="trace"``,
            what a trace evaluation refuses (a lightning core...) is refused here.

    Raises:
        ComposoValidationError: An argument is invalid (named in the message).
    """

    # Bookkeeping is cheap and thread-safe, so async runs call it directly, in event order.
    run_inline = True

    def __init__(
        self,
        criteria: str | Sequence[str] | None = None,
        *,
        client: Composo | AsyncComposo | None = None,
        mode: Mode = "llm",
        on_result: Callable[[EvaluationRecord], Any] | None = None,
        raise_error: bool = False,
        evaluator_name: str | Sequence[str] | None = None,
        max_results: int | None = 1000,
        max_pending: int = 1000,
        **options: Unpack[EvaluateOptions],
    ) -> None:
        if mode not in ("llm", "trace"):
            raise ComposoValidationError(
                f"mode: {mode!r} is not a mode; use 'llm' (each model call) or 'trace' (whole runs)"
            )
        given = check_options(options, "ComposoCallback")
        if mode == "trace":  # the model core its evaluations will have, the client's included
            core = given.get("model_core") or getattr(client, "model_core", None)
            check_options({**given, "model_core": core}, "ComposoCallback", trace=True)
        self._evaluator = BackgroundEvaluator(
            criteria,
            evaluator_name=evaluator_name,
            client=client,
            on_result=on_result,
            max_results=max_results,
            max_pending=max_pending,
            options=given,
            name="composo-langchain",
        )
        self.mode: Mode = mode
        self.criteria = self._evaluator.criteria
        self.raise_error = raise_error
        self._lock = threading.Lock()
        self._runs: dict[UUID, Run] = {}
        self._warned_closed = False

    def __repr__(self) -> str:
        return f"ComposoCallback(mode={self.mode!r}, criteria={self.criteria!r})"

    # -- what users call ----------------------------------------------------------------------

    @property
    def results(self) -> list[EvaluationRecord]:
        """Evaluation records, oldest first."""
        return self._evaluator.results

    @property
    def pending(self) -> int:
        """Evaluations submitted and not finished."""
        return self._evaluator.pending

    @property
    def stats(self) -> dict[str, int]:
        """``completed``, ``failed`` and ``pending`` evaluation counts."""
        return self._evaluator.stats

    @property
    def open_runs(self) -> int:
        """Runs started and not ended yet (zero once every run has finished)."""
        with self._lock:
            return len(self._runs)

    def flush(self, timeout: float | None = None) -> bool:
        """Wait for pending evaluations; ``False`` if ``timeout`` (seconds) passed first.

        Raises:
            ComposoError: With ``raise_error=True``, the first failure recorded since last time.
        """
        done = self._evaluator.flush(timeout)
        self._raise_recorded()
        return done

    async def aflush(self, timeout: float | None = None) -> bool:
        """:meth:`flush` for async code: the event loop runs on while it waits."""
        done = await self._evaluator.aflush(timeout)
        self._raise_recorded()
        return done

    def close(self, timeout: float | None = 5.0) -> None:
        """Wait up to ``timeout`` seconds for pending evaluations, then release the client this
        callback made. Runs after this are not evaluated; closing twice is harmless."""
        self._evaluator.close(timeout)

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._evaluator.closed

    def __enter__(self) -> ComposoCallback:
        return self

    def __exit__(self, *exc_info: object) -> None:
        """Flush (raising recorded failures with ``raise_error=True``) and close."""
        try:
            if exc_info[0] is None:
                self.flush()
        finally:
            self.close(None)

    async def __aenter__(self) -> ComposoCallback:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        try:
            if exc_info[0] is None:
                await self.aflush()
        finally:
            await self._evaluator.aclose(None)

    # -- LangChain events ---------------------------------------------------------------------
    # LangChain calls these from whichever thread or event loop runs the chain. Each one only
    # touches the run map under the lock; conversion and HTTP happen on the background thread.
    # ``parent_run_id``, ``tags``, ``metadata`` and ``name`` arrive in ``kwargs``.

    @property
    def ignore_chain(self) -> bool:
        return self.mode == "llm"

    ignore_retriever = ignore_agent = ignore_chain  # LangChain files tool events under "agent"

    def on_chat_model_start(
        self, serialized: dict[str, Any], messages: list[list[Any]], *, run_id: UUID, **kwargs: Any
    ) -> None:
        run = self._start_model_call(run_id, serialized, kwargs)
        run.messages = list(messages[0]) if messages else []
        params = kwargs.get("invocation_params")
        run.tools = params.get("tools") if isinstance(params, dict) else None

    def on_llm_start(
        self, serialized: dict[str, Any], prompts: list[str], *, run_id: UUID, **kwargs: Any
    ) -> None:
        self._start_model_call(run_id, serialized, kwargs).messages = list(prompts[:1])

    def _start_model_call(
        self, run_id: UUID, serialized: dict[str, Any], kwargs: dict[str, Any]
    ) -> Run:
        self._raise_recorded()
        return self._start(run_id, "llm", serialized, kwargs)

    def on_llm_end(self, response: LLMResult, *, run_id: UUID, **kwargs: Any) -> None:
        run = self._end(run_id, response)
        if run is None:
            return
        if self.mode == "llm":
            self._submit_llm(run)
        elif run.parent is None:
            self._submit_trace(run)

    def on_chain_start(
        self, serialized: dict[str, Any] | None, inputs: Any, *, run_id: UUID, **kwargs: Any
    ) -> None:
        if kwargs.get("parent_run_id") is None:
            self._raise_recorded()
        self._start(run_id, "chain", serialized, kwargs, kwargs.get("tags"))

    # Tools and retrievers only place the runs under them.
    def on_tool_start(
        self, serialized: Any, input_str: str, *, run_id: UUID, **kwargs: Any
    ) -> None:
        self._start(run_id, "tool", serialized, kwargs)

    def on_retriever_start(
        self, serialized: Any, query: str, *, run_id: UUID, **kwargs: Any
    ) -> None:
        self._start(run_id, "chain", serialized, kwargs)

    # Ends: a finished root is evaluated (its output is not needed), and so is a root that
    # raised (with its error); a cancelled run is not. A retriever only ends.

    def on_chain_end(self, *_: Any, run_id: UUID, **kwargs: Any) -> None:
        run = self._end(run_id)
        if run is not None and run.parent is None:
            self._submit_trace(run)

    on_tool_end = on_chain_end

    def on_retriever_end(self, *_: Any, run_id: UUID, **kwargs: Any) -> None:
        self._end(run_id)

    on_retriever_error = on_retriever_end

    def on_chain_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._failed(run_id, error)

    on_llm_error = on_tool_error = on_chain_error

    def _failed(self, run_id: UUID, error: BaseException) -> None:
        run = self._end(run_id)
        if run is None or run.parent is not None or self.mode != "trace":
            return
        if not isinstance(error, Exception):  # cancelled or interrupted: the caller stopped it
            _log.info(
                "run %s (%s) was stopped (%s); not evaluated", run_id, run.name, error_note(error)
            )
            return
        run.error = error
        self._submit_trace(run)

    # -- bookkeeping ------------------------------------------------------------------------------

    def _start(
        self,
        run_id: UUID,
        kind: str,
        serialized: dict[str, Any] | None,
        kwargs: dict[str, Any],
        tags: list[str] | None = None,
    ) -> Run:
        """Track a run that started (``kwargs``: the event's ``parent_run_id``, ``name`` and
        ``metadata``)."""
        parent_run_id, metadata = kwargs.get("parent_run_id"), kwargs.get("metadata")
        name = kwargs.get("name")
        if not isinstance(name, str) or not name:
            name = (serialized or {}).get("name") or kind
        with self._lock:
            parent = self._runs.get(parent_run_id) if parent_run_id is not None else None
            if self.mode == "llm":
                # Model calls are judged alone; their parents are not tracked.
                run = Run(run_id, kind, name, None, metadata, tree=False)
            else:
                if parent is not None and kind == "chain" and Run.is_graph_step(tags):
                    parent.graph_step_started()
                run = Run(run_id, kind, name, parent, metadata, tree=True)
            self._runs[run_id] = run
        return run

    def _end(self, run_id: UUID, output: LLMResult | None = None) -> Run | None:
        """Forget a finished run; a finished root also takes every unfinished run under it."""
        with self._lock:
            run = self._runs.pop(run_id, None)
            if run is None:
                return None
            if output is not None:
                run.output = output
                run.root.model_calls += 1
            run.ended(output)
            open_ids = run.root.open
            if open_ids is not None:
                open_ids.discard(run_id)
                if run.parent is None:
                    for stale in open_ids:
                        self._runs.pop(stale, None)
                    run.open = None
        return run

    def _accepting(self, run: Run) -> bool:
        """A closed callback evaluates nothing more; the run goes on, and the log says why."""
        if not self._evaluator.closed:
            return True
        if not self._warned_closed:
            self._warned_closed = True
            _log.warning(
                "ComposoCallback is closed; run %s (%s) and later runs are not evaluated "
                "(make a new callback, or close it after its last run)",
                run.run_id,
                run.name,
            )
        return False

    def _submit_llm(self, run: Run) -> None:
        if not self._accepting(run):
            return
        metadata = {"name": run.name, "mode": "llm"}
        if run.metadata:
            metadata["metadata"] = run.metadata  # type: ignore[assignment]
        self._evaluator.submit(str(run.run_id), "evaluate", lambda: llm_evaluation(run), metadata)

    def _submit_trace(self, root: Run) -> None:
        if self.mode != "trace" or not self._accepting(root):
            return
        metadata: dict[str, Any] = {"name": root.name, "mode": "trace"}
        if root.error is not None:
            metadata["error"] = error_note(root.error)
        elif not root.model_calls:
            _log.debug("run %s made no model call; nothing to evaluate", root.run_id)
            return
        # A run that failed before any model call is recorded as a failed evaluation.
        self._evaluator.submit(
            str(root.run_id), "evaluate_trace", lambda: {"trace": trace_of(root)}, metadata
        )

    def _raise_recorded(self) -> None:
        if not self.raise_error:
            return
        errors = self._evaluator.take_errors()
        if errors and errors[0].error is not None:
            if len(errors) > 1:
                _log.error("%d more Composo evaluations failed (see results)", len(errors) - 1)
            raise errors[0].error
