"""The supported surface for framework integrations and third-party adapters.

Framework packages (``langchain-composo``, ``llama-index-evaluation-composo``, and yours) build on
these names and nothing else inside ``composo``; everything not exported here, from ``composo``,
``composo.types``, ``composo.errors`` or ``composo.plugins`` is private and may change in any
release. The import contract checked in CI keeps the bundled integrations to this surface.

- Background evaluation: :class:`BackgroundEvaluator` runs evaluations beside a framework's run
  (on one background thread shared by the process) and keeps an :class:`EvaluationRecord` per
  outcome, saying what was evaluated (never raising into the caller); :func:`criterion_kind`
  tells a criterion's kind (:data:`CriterionKind`) by its prefix.
- Option checking: the same checks the clients make, for options taken at construction time
  (:func:`check_options`: every evaluate option, with what a trace evaluation refuses when
  asked; :func:`check_model_core`, :func:`normalize_tags`); :data:`LIGHTNING_MODEL_CORES`.
- Message conversion: what the plugins turn a foreign object into, or a clear error.
- Traces: :class:`TraceRecorder` turns a framework's events (agent started and finished, model
  call recorded or reserved and filled, tool called and answered) into a ``MultiAgentTrace``;
  every capture in the project records into it. :class:`Agent` and :class:`Step` are what its
  events return, :data:`Interaction` what a model call may be handed over as, and
  :class:`Capture` the base of a ``with`` / ``async with`` recording block.
  :func:`to_trace_inputs`, :func:`to_trace_outputs` and :func:`to_trace_tool` turn a model call's
  chat messages and tool definitions (OpenAI-style dicts) into trace messages and tools, and
  :func:`to_trace_interaction` the whole call into an ``LLMInteraction``, as every capture does.
  :func:`record_interaction` hands a captured model call to the running ``AgentTracer``;
  :class:`OpenInferenceInstrument` is the base of an OpenInference instrument.
- Packaging: :func:`lazy_exports` gives a package names that load on first use.

Every name loads on first use, so importing this module (as each integration package's
``__init__`` does for :func:`lazy_exports`) costs next to nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from composo._lazy import lazy_exports

if TYPE_CHECKING:
    from composo._background import (
        BackgroundEvaluator,
        BacklogFullError,
        CriterionKind,
        EvaluationRecord,
        criterion_kind,
    )
    from composo._core.build import (
        check_model_core,
        check_options,
        normalize_criteria,
        normalize_tags,
    )
    from composo._core.convert import (
        to_input_messages,
        to_item,
        to_messages,
        to_result_messages,
        to_tools,
        to_trace,
        unsupported,
    )
    from composo._core.cores import LIGHTNING_MODEL_CORES
    from composo._core.trace import chat_interaction as to_trace_interaction
    from composo._core.trace import input_messages as to_trace_inputs
    from composo._core.trace import output_messages as to_trace_outputs
    from composo._core.trace import tool_spec as to_trace_tool
    from composo._core.trace import trace_from_messages
    from composo._core.wire import check_criterion, is_binary
    from composo.tracing._agent import current_tracer, record_interaction
    from composo.tracing._instruments import Instrument, OpenInferenceInstrument
    from composo.tracing._recorder import Agent, Capture, Interaction, Step, TraceRecorder

__all__ = [
    "LIGHTNING_MODEL_CORES",
    "Agent",
    "BackgroundEvaluator",
    "BacklogFullError",
    "Capture",
    "CriterionKind",
    "EvaluationRecord",
    "Instrument",
    "Interaction",
    "OpenInferenceInstrument",
    "Step",
    "TraceRecorder",
    "check_criterion",
    "check_model_core",
    "check_options",
    "criterion_kind",
    "current_tracer",
    "is_binary",
    "lazy_exports",
    "normalize_criteria",
    "normalize_tags",
    "record_interaction",
    "to_input_messages",
    "to_item",
    "to_messages",
    "to_result_messages",
    "to_tools",
    "to_trace",
    "to_trace_inputs",
    "to_trace_interaction",
    "to_trace_outputs",
    "to_trace_tool",
    "trace_from_messages",
    "unsupported",
]

# module -> the names it gives (each loads on first use), then the names given under another
_FROM = {
    "composo._background": "BackgroundEvaluator BacklogFullError CriterionKind EvaluationRecord "
    "criterion_kind",
    "composo._core.build": "check_model_core check_options normalize_criteria normalize_tags",
    "composo._core.convert": "to_input_messages to_item to_messages to_result_messages to_tools "
    "to_trace unsupported",
    "composo._core.trace": "trace_from_messages",
    "composo._core.cores": "LIGHTNING_MODEL_CORES",
    "composo._core.wire": "check_criterion is_binary",
    "composo.tracing._agent": "current_tracer record_interaction",
    "composo.tracing._instruments": "Instrument OpenInferenceInstrument",
    "composo.tracing._recorder": "Agent Capture Interaction Step TraceRecorder",
}
_RENAMED = {
    "to_trace_inputs": "composo._core.trace:input_messages",
    "to_trace_interaction": "composo._core.trace:chat_interaction",
    "to_trace_outputs": "composo._core.trace:output_messages",
    "to_trace_tool": "composo._core.trace:tool_spec",
}
__getattr__, __dir__ = lazy_exports(
    __name__, {name: m for m, names in _FROM.items() for name in names.split()} | _RENAMED
)
