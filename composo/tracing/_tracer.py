"""``ComposoTracer``: switch on the instruments whose spans ``AgentTracer`` turns into traces.

An application's SDK ``TracerProvider`` gets one span processor added, so its exporters keep
every span. Without one, Composo makes a private provider and does not install it globally, so
the application can still set its own later (then ``shutdown()`` and ``init()`` again).
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Iterable
from typing import Any, ClassVar

from composo.errors import ComposoValidationError
from composo.tracing._boundaries import AGENT_SCOPE
from composo.tracing._instruments import (
    Instrument,
    Instruments,
    OpenInferenceInstrument,
    by_name,
    missing_extra,
)

try:
    from opentelemetry import trace as trace_api
    from opentelemetry.sdk.trace import SpanLimits, TracerProvider

    from composo.tracing._processor import AgentSpanProcessor
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise missing_extra(exc) from exc

__all__ = ["ComposoTracer"]

_log = logging.getLogger("composo.tracing")

# One processor per provider, even across shutdown()/init() (processors cannot be removed).
_processors: weakref.WeakKeyDictionary[Any, AgentSpanProcessor] = weakref.WeakKeyDictionary()


def _one(item: Any, where: str) -> Instrument:
    """An instrument from what a user passed: a member, a name, an instrument, an instrumentor."""
    if isinstance(item, Instruments):
        return item.resolve()
    if isinstance(item, str):
        return by_name(item)
    if callable(getattr(item, "instrument", None)):
        return Instruments.wrap(item)  # an instrument, or an instrumentor object passed as is
    raise ComposoValidationError(
        f"{where}: {item!r} is not an instrument; pass Instruments.OPENAI (or a list of "
        "Instruments members, names such as 'openai', or instrumentor objects)"
    )


def _instrument_list(instruments: Any) -> list[Instrument]:
    if instruments is None:
        return [Instruments.OPENAI.resolve()]
    single = isinstance(instruments, (Instruments, str)) or callable(
        getattr(instruments, "instrument", None)
    )
    if single or not isinstance(instruments, Iterable):
        chosen = [_one(instruments, "instruments")]
    else:
        chosen = [_one(item, f"instruments[{i}]") for i, item in enumerate(instruments)]
    # Every instrumentor is importable before any is switched on.
    for inst in chosen:
        if isinstance(inst, OpenInferenceInstrument):
            inst.load()
    return chosen


def _choose_provider(explicit: Any) -> tuple[Any, bool]:
    """The provider to instrument with, and whether Composo created it."""
    if explicit is not None:
        if not hasattr(explicit, "add_span_processor"):
            raise ComposoValidationError(
                f"tracer_provider: {type(explicit).__name__} cannot take span processors; pass an "
                "opentelemetry.sdk.trace.TracerProvider"
            )
        return explicit, False
    current = trace_api.get_tracer_provider()
    if hasattr(current, "add_span_processor"):
        return current, False
    if not isinstance(current, trace_api.ProxyTracerProvider):
        _log.warning(
            "the global tracer provider (%s) cannot take span processors; instrumented calls go "
            "to a provider of Composo's own and not to it",
            type(current).__name__,
        )
    # Conversations easily exceed the default limit of 128 attributes per span.
    limits = SpanLimits(max_span_attributes=SpanLimits.UNSET)
    return TracerProvider(span_limits=limits), True


def _warn_if_sampled(provider: Any) -> None:
    sampler = getattr(provider, "sampler", None)
    if sampler is None:
        return
    described = str(sampler.get_description())
    if not described.startswith(("AlwaysOnSampler", "ParentBased{root:AlwaysOnSampler")):
        _log.warning(
            "the tracer provider samples spans (%s); model calls in unsampled traces will be "
            "missing from AgentTracer traces",
            described,
        )


class ComposoTracer:
    """Process-wide switch for tracing: ``ComposoTracer.init(instruments=Instruments.OPENAI)``.

    Every instrumented call then becomes a span; the ones made inside an ``AgentTracer`` are
    recorded into its trace. All methods are class methods and safe from any thread.
    """

    _lock: ClassVar[threading.Lock] = threading.Lock()
    _provider: ClassVar[Any] = None
    _owns_provider: ClassVar[bool] = False
    _processor: ClassVar[AgentSpanProcessor | None] = None
    _instrumented: ClassVar[dict[str, Instrument]] = {}
    _agent_spans: ClassVar[bool] = False

    @classmethod
    def init(
        cls,
        instruments: Instruments
        | str
        | Instrument
        | Iterable[Instruments | str | Instrument]
        | Any = None,
        *,
        tracer_provider: Any = None,
        agent_spans: bool = False,
    ) -> TracerProvider:
        """Switch on ``instruments``; safe to call again (instruments already on are left
        alone, new ones are added).

        Args:
            instruments: One ``Instruments`` member or a list (default ``Instruments.OPENAI``;
                ``[]`` for none). A name works too (``"openai"``, or any installed
                OpenInference instrumentor's, such as ``"mistralai"``), and so does an
                instrument object from a plugin or any instrumentor object
                (``CrewAIInstrumentor()``).
            tracer_provider: The OpenTelemetry SDK provider to add Composo's span processor to
                (default: the global SDK provider if there is one, else a private one).
            agent_spans: Also emit an OpenInference ``AGENT`` span for each ``AgentTracer``
                run, so the application's own exporters (an OTLP file or collector) carry the
                agent boundaries that ``trace_from_otlp`` and ``composo serve --otlp`` read.

        Returns:
            The OpenTelemetry tracer provider the instrumented calls' spans go to (add your own
            exporters to it; Composo does not make it the global provider).

        Raises:
            ComposoValidationError: ``instruments`` holds something that is not an instrument
                or names none, ``tracer_provider`` cannot take span processors, or tracing is
                already on with another provider.
            ImportError: An instrument's library is missing (the message names what to
                install); then nothing new is switched on.
        """
        chosen = _instrument_list(instruments)
        with cls._lock:
            if cls._provider is None:
                provider, owned = _choose_provider(tracer_provider)
                processor = _processors.get(provider)
                if processor is None:
                    processor = AgentSpanProcessor()
                    provider.add_span_processor(processor)
                    _processors[provider] = processor
                processor.active = True
                _warn_if_sampled(provider)
                cls._provider, cls._owns_provider, cls._processor = provider, owned, processor
            elif tracer_provider is not None and tracer_provider is not cls._provider:
                raise ComposoValidationError(
                    "tracer_provider: tracing is already on with another provider; call "
                    "ComposoTracer.shutdown() before init() with a new one"
                )
            cls._agent_spans = cls._agent_spans or agent_spans
            for inst in chosen:
                if inst.name in cls._instrumented:
                    continue
                inst.instrument(cls._provider)
                cls._instrumented[inst.name] = inst
                _log.debug("instrumented %s", inst.name)
            return cls._provider  # type: ignore[no-any-return]

    @classmethod
    def shutdown(cls) -> None:
        """Switch every instrument off and stop routing spans; ``init`` may be called again."""
        with cls._lock:
            for name, inst in reversed(list(cls._instrumented.items())):
                try:
                    inst.uninstrument()
                except Exception:
                    _log.exception("could not uninstrument %s", name)
            cls._instrumented.clear()
            if cls._processor is not None:
                cls._processor.active = False
            if cls._owns_provider and cls._provider is not None:
                cls._provider.shutdown()
            cls._provider, cls._owns_provider, cls._processor = None, False, None
            cls._agent_spans = False

    @classmethod
    def instrumented(cls) -> list[str]:
        """Names of the instruments currently on, in the order they were switched on."""
        with cls._lock:
            return list(cls._instrumented)

    @classmethod
    def agent_span_tracer(cls) -> Any:
        """The OpenTelemetry tracer ``AgentTracer`` emits agent spans with, or ``None`` when
        ``init(agent_spans=True)`` was not called."""
        provider = cls._provider
        if provider is None or not cls._agent_spans:
            return None
        return provider.get_tracer(AGENT_SCOPE)

    @classmethod
    def tracer_provider(cls) -> Any:
        """The OpenTelemetry provider in use, or ``None`` before ``init``."""
        return cls._provider
