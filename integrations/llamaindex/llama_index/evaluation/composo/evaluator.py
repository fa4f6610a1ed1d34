"""``ComposoEvaluator``: Composo criteria as a LlamaIndex ``BaseEvaluator`` (so it drops into
``BatchEvalRunner`` and ``evaluate_response`` unchanged)."""

from __future__ import annotations

import asyncio
import logging
import statistics
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from llama_index.core.evaluation import BaseEvaluator, EvaluationResult
from llama_index.core.prompts.mixin import PromptDictType
from llama_index.evaluation.composo.messages import (
    agent_output_messages,
    agent_tools,
    node_text,
    response_messages,
    source_material_message,
)

from composo import AsyncComposo, Composo, ext
from composo.errors import ComposoError, ComposoValidationError
from composo.ext import check_options, normalize_criteria
from composo.types import MultiAgentTraceResponse

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from composo.types import EvaluateOptions

__all__ = ["ComposoEvaluator"]

_log = logging.getLogger("composo.llamaindex")


class ComposoEvaluator(BaseEvaluator):
    """Score ``(query, response, contexts)`` against one or more Composo criteria.

    ``contexts`` are sent as one ``system`` message just before the answer (see
    ``source_material_message``). A criterion that does not apply gives ``score=None`` and
    ``passing=None``; an API failure gives ``invalid_result=True`` unless ``raise_on_error``.

    ``evaluate`` / ``aevaluate`` also take ``messages`` (a chat history instead of ``query``;
    ``response`` and ``contexts`` are appended), ``trace`` (a ``MultiAgentTrace`` or a finished
    ``LlamaIndexTraceCapture``, sent to ``evaluate_trace``), ``tools`` (definitions, LlamaIndex
    tools or an agent), ``agent`` (a workflow agent or ``AgentWorkflow`` whose tools are sent when
    ``tools`` is not given: a ReAct agent's calls carry none) and ``system``.

    Args:
        criteria: One criterion or several (the mean of the applicable scores).
        client: A ``Composo`` or ``AsyncComposo``, shared by every call. ``aevaluate`` awaits an
            ``AsyncComposo`` (use it from one loop) and runs a ``Composo`` on a worker thread;
            ``evaluate`` with an ``AsyncComposo`` uses ``Composo.from_client``. Default: one
            made from the arguments below or the environment.
        threshold: ``passing`` is ``score >= threshold``.
        api_key: The Composo API key for the client made here.
        base_url: The Composo server for the client made here.
        raise_on_error: Raise API failures instead of returning ``invalid_result=True``.
        timeout: Seconds each evaluation may take (client made here; default: the client's).
        num_retries: Retries after the first attempt (client made here; default: the client's).
        max_concurrent_requests: Requests in flight for the clients made here (default: the
            client's); give ``BatchEvalRunner`` about as many ``workers``.
        **options: :class:`~composo.types.EvaluateOptions` sent with every evaluation, checked
            here.

    Raises:
        ComposoValidationError: An argument is invalid (named in the message).
        TypeError: An option that does not exist.
    """

    def __init__(
        self,
        criteria: str | Sequence[str],
        client: Composo | AsyncComposo | None = None,
        threshold: float = 0.5,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        raise_on_error: bool = False,
        timeout: float | None = None,
        num_retries: int | None = None,
        max_concurrent_requests: int | None = None,
        **options: Unpack[EvaluateOptions],
    ) -> None:
        if criteria is None:
            raise ComposoValidationError("criteria: give at least one criterion")
        requests, _ = normalize_criteria(criteria, None)
        self.criteria = [r["evaluation_criteria"] for r in requests]
        if (
            isinstance(threshold, bool)
            or not isinstance(threshold, (int, float))
            or not (0.0 <= threshold <= 1.0)
        ):
            raise ComposoValidationError(f"threshold: a number between 0 and 1, got {threshold!r}")
        self._options = check_options(options, type(self).__name__)
        given: dict[str, Any] = {"api_key": api_key, "base_url": base_url, "timeout": timeout}
        given |= {"num_retries": num_retries, "max_concurrent_requests": max_concurrent_requests}
        settings = {k: v for k, v in given.items() if v is not None}  # else the client's
        if client is not None:
            if not isinstance(client, (Composo, AsyncComposo)):
                raise ComposoValidationError(
                    f"client: expected composo.Composo or composo.AsyncComposo, got "
                    f"{type(client).__name__}"
                )
            if settings:
                raise ComposoValidationError(
                    f"{next(iter(settings))}: set it on the client you pass (or use "
                    "Composo.from_client(client, ...)); it is for the client made here"
                )
        self.threshold = float(threshold)
        self.raise_on_error = raise_on_error
        self._given = client
        self._lock = threading.Lock()
        self._settings = settings
        # The blocking client made here when none is given: now, so that a missing API key
        # fails here, not in the middle of a batch (with an AsyncComposo: on first use).
        self._made = Composo(**settings) if client is None else None
        # The async calls' own client (made on first use; it keeps connections per event loop):
        # a thread each through asyncio.to_thread would cap them at the default executor's size.
        self._made_async: AsyncComposo | None = None

    def __repr__(self) -> str:
        shown = self.criteria[0][:40] + ("..." if len(self.criteria[0]) > 40 else "")
        more = f" (+{len(self.criteria) - 1})" if len(self.criteria) > 1 else ""
        return f"{type(self).__name__}({shown!r}{more}, threshold={self.threshold})"

    # -- PromptMixin: Composo criteria are not LlamaIndex prompts -------------------------------

    def _get_prompts(self) -> PromptDictType:
        return {}

    def _update_prompts(self, prompts_dict: PromptDictType) -> None:
        if prompts_dict:
            raise ValueError(f"{type(self).__name__} has no prompts; set criteria= instead")

    # -- clients ---------------------------------------------------------------------------------

    def _sync_client(self) -> Composo:
        if isinstance(self._given, Composo):
            return self._given
        with self._lock:
            if self._made is None:
                given = self._given
                self._made = (
                    Composo(**self._settings) if given is None else Composo.from_client(given)
                )
            return self._made

    def _async_client(self) -> AsyncComposo:
        if isinstance(self._given, AsyncComposo):
            return self._given
        with self._lock:
            if self._made_async is None:
                self._made_async = AsyncComposo(**self._settings)
            return self._made_async

    def close(self) -> None:
        """Close the clients this evaluator made (never one that was passed in); the async
        one's connections close with their event loops."""
        with self._lock:
            made, self._made = self._made, None
            self._made_async = None
        if made is not None:
            made.close()

    async def aclose(self) -> None:
        """:meth:`close`, for async code (the async client's connections on this loop too)."""
        made_async = self._made_async
        self.close()
        if made_async is not None:
            await made_async.aclose()

    # -- evaluation ------------------------------------------------------------------------------

    def evaluate(
        self,
        query: str | None = None,
        response: str | None = None,
        contexts: Sequence[str] | None = None,
        **kwargs: Any,
    ) -> EvaluationResult:
        """Score synchronously (works inside a running event loop too).

        Args:
            query: The user's question (or pass ``messages=`` for a whole chat history).
            response: The answer to score.
            contexts: Retrieved chunks, sent as source material before the answer.
            **kwargs: ``messages``, ``trace``, ``tools``, ``agent``, ``system`` (see the class).

        Raises:
            ComposoValidationError: The input cannot be evaluated (before any request).
            ComposoError: An API failure, with ``raise_on_error=True``.
        """
        result, sent = self._prepare(query, response, contexts, kwargs)
        try:
            out = _method(self._sync_client(), sent)(**sent)
        except ComposoError as exc:
            return self._failed(result, exc)
        return self._result(result, out)

    async def aevaluate(
        self,
        query: str | None = None,
        response: str | None = None,
        contexts: Sequence[str] | None = None,
        sleep_time_in_seconds: float = 0,
        **kwargs: Any,
    ) -> EvaluationResult:
        """:meth:`evaluate` without blocking the event loop; ``sleep_time_in_seconds`` waits
        first (LlamaIndex's rate-limiting knob)."""
        result, sent = self._prepare(query, response, contexts, kwargs)
        if sleep_time_in_seconds:
            await asyncio.sleep(sleep_time_in_seconds)
        try:
            if isinstance(self._given, Composo):  # the caller's blocking client, on a thread
                out = await asyncio.to_thread(_method(self._given, sent), **sent)
            else:
                out = await _method(self._async_client(), sent)(**sent)
        except ComposoError as exc:
            return self._failed(result, exc)
        return self._result(result, out)

    def evaluate_response(
        self, query: str | None = None, response: Any = None, **kwargs: Any
    ) -> EvaluationResult:
        """Score a query engine ``Response``, an ``AgentChatResponse`` or a workflow agent's
        ``AgentOutput``: source nodes become source material and recorded tool calls part of the
        conversation. Pass ``agent=`` too so the tools it was offered are sent."""
        return self.evaluate(query=query, **self._response_kwargs(response), **kwargs)

    async def aevaluate_response(
        self, query: str | None = None, response: Any = None, **kwargs: Any
    ) -> EvaluationResult:
        """:meth:`evaluate_response` on the running event loop."""
        return await self.aevaluate(query=query, **self._response_kwargs(response), **kwargs)

    # -- helpers ---------------------------------------------------------------------------------

    @staticmethod
    def _response_kwargs(response: Any) -> dict[str, Any]:
        if response is None:
            return {}
        if _is_agent_output(response):  # what a workflow agent's run() returns
            answer = agent_output_messages(response)
            return {"response": answer[-1].get("content") or "", "_answer": answer}
        if not hasattr(response, "source_nodes") or not hasattr(response, "response"):
            raise ComposoValidationError(
                f"response: expected a llama_index Response, AgentChatResponse or AgentOutput, got "
                f"{type(response).__name__}; pass strings to evaluate(query=, response=)"
            )
        return {
            "response": response.response,
            "contexts": [node_text(n) for n in response.source_nodes],
            "_answer": response_messages(response),
        }

    def _prepare(
        self,
        query: str | None,
        response: str | None,
        contexts: Sequence[str] | None,
        kwargs: dict[str, Any],
    ) -> tuple[EvaluationResult, dict[str, Any]]:
        """The result to fill in, and the keyword arguments of the client's call."""
        answer = kwargs.pop("_answer", None)
        messages = kwargs.pop("messages", None)
        trace = kwargs.pop("trace", None)
        tools = kwargs.pop("tools", None)
        agent = kwargs.pop("agent", None)
        system = kwargs.pop("system", None)
        if agent is not None:
            offered = agent_tools(agent)
            if offered is None and not _is_agent(agent):
                raise ComposoValidationError(
                    f"agent: expected a llama_index workflow agent (FunctionAgent, ReActAgent...) "
                    f"or AgentWorkflow, got {type(agent).__name__}"
                )
            if tools is None and trace is None:
                tools = offered
        if kwargs:
            raise ComposoValidationError(
                f"{', '.join(sorted(kwargs))}: not an option of {type(self).__name__}.evaluate; "
                "it takes query, response, contexts, messages, trace, tools, agent and system"
            )
        if contexts is not None and (
            isinstance(contexts, str) or not all(isinstance(c, str) for c in contexts)
        ):
            raise ComposoValidationError("contexts: expected a list of strings (retrieved chunks)")
        result = EvaluationResult(
            query=query, response=response, contexts=list(contexts) if contexts else None
        )
        if trace is not None:
            if any(v is not None for v in (messages, query, response, contexts, tools, system)):
                raise ComposoValidationError(
                    "trace: give either trace= or a conversation (query, response, contexts, "
                    "messages, tools, system), not both: a trace carries its own"
                )
            return result, {"criteria": self.criteria, "trace": trace, **self._options}
        return result, {
            "criteria": self.criteria,
            "messages": self._conversation(query, response, contexts, messages, answer),
            "tools": tools,
            "system": system,
            **self._options,
        }

    @staticmethod
    def _conversation(
        query: str | None,
        response: str | None,
        contexts: Sequence[str] | None,
        messages: Any,
        answer: list[dict[str, Any]] | None,
    ) -> list[dict[str, Any]]:
        convo: list[dict[str, Any]] = []
        if messages is not None:
            convo.extend(ext.to_messages(messages))
        if query is not None:
            if not isinstance(query, str):
                raise ComposoValidationError(
                    f"query: expected a string, got {type(query).__name__}"
                )
            convo.append({"role": "user", "content": query})
        if answer is not None:  # from a Response object: source material already in place
            return convo + answer
        if contexts:
            source = source_material_message(list(contexts))
            last = max((i for i, m in enumerate(convo) if m.get("role") == "assistant"), default=-1)
            if response is None and last >= 0:
                convo.insert(last, source)  # just before the answer already in the history
            else:
                convo.append(source)
        if response is not None:
            if not isinstance(response, str):
                raise ComposoValidationError(
                    f"response: expected a string, got {type(response).__name__}; "
                    "use evaluate_response() for Response objects"
                )
            convo.append({"role": "assistant", "content": response})
        elif messages is None:
            raise ComposoValidationError(
                "response: required (the answer to evaluate), or pass messages= with the chat "
                "history ending in the answer"
            )
        if not any(m.get("role") == "user" for m in convo):
            raise ComposoValidationError(
                "query: required (the user's question), or pass messages= with the chat history"
            )
        return convo

    def _result(self, result: EvaluationResult, out: Any) -> EvaluationResult:
        scores: list[float] = []
        notes: list[str] = []
        answers = out if isinstance(out, list) else [out]  # one criterion: one response
        for criterion, ans in zip(self.criteria, answers, strict=True):
            score = ans.overall_score if isinstance(ans, MultiAgentTraceResponse) else ans.score
            text = ans.explanation
            if score is not None:
                scores.append(score)
            verdict = "not applicable" if score is None else f"{score:.2f}"
            notes.append(text if len(self.criteria) == 1 else f"[{verdict}] {criterion}: {text}")
        score = statistics.fmean(scores) if scores else None
        return result.model_copy(
            update={
                "score": score,
                "passing": None if score is None else score >= self.threshold,
                "feedback": "\n".join(notes),
            }
        )

    def _failed(self, result: EvaluationResult, exc: ComposoError) -> EvaluationResult:
        """An API failure, as a result marked invalid; bad input is always raised."""
        if self.raise_on_error or isinstance(exc, ComposoValidationError):
            raise exc
        reason = f"{type(exc).__name__}: {exc}"
        _log.warning("Composo evaluation failed, result marked invalid: %s", reason)
        return result.model_copy(update={"invalid_result": True, "invalid_reason": reason})


def _is_agent(obj: Any) -> bool:
    return type(obj).__module__.startswith("llama_index.") and hasattr(obj, "tools")


def _is_agent_output(obj: Any) -> bool:
    # Checked by name: importing the agent workflow package only for this costs start-up time.
    kind = type(obj)
    return kind.__name__ == "AgentOutput" and kind.__module__.startswith("llama_index.")


def _method(client: Any, sent: dict[str, Any]) -> Any:
    return client.evaluate_trace if "trace" in sent else client.evaluate
