"""What ``ComposoTracer.init`` can switch on: ``Instruments.OPENAI``, every installed
OpenInference instrumentor, and those plugins add.

An instrument is any object with a ``name`` and ``instrument(tracer_provider)`` /
``uninstrument()`` methods. Integration packages contribute theirs through the
``composo_instruments`` hook; every installed OpenInference instrumentor package (they announce
themselves under the ``openinference_instrumentor`` entry-point group: Anthropic, LiteLLM, the
OpenAI Agents SDK, CrewAI, DSPy, Bedrock...) is a member named after its entry point
(``Instruments.ANTHROPIC``, ``Instruments.OPENAI_AGENTS``); any other instrumentor object goes
through :meth:`_Instruments.wrap`. ``Instruments.<NAME>`` finds them by name (``"llama-index"`` and
``"llama_index"`` both answer to ``Instruments.LLAMA_INDEX``). Nothing optional is imported here
until an instrument is switched on.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import logging
from typing import Any, Protocol, runtime_checkable

from composo._core.plugins import get_plugin_manager

__all__ = [
    "EntryPointInstrument",
    "Instrument",
    "InstrumentorInstrument",
    "Instruments",
    "OpenAIInstrument",
    "OpenInferenceInstrument",
    "attribute_name",
    "missing_extra",
]

ENTRY_POINT_GROUP = "openinference_instrumentor"

_log = logging.getLogger("composo.tracing")

# Instruments users ask for that other distributions provide: name -> what to install.
_PROVIDED_BY = {
    "LANGCHAIN": "langchain-composo",
    "LLAMA_INDEX": "llama-index-evaluation-composo",
    "ANTHROPIC": "composo[anthropic]",
    "LITELLM": "composo[litellm]",
    "OPENAI_AGENTS": "composo[agents]",
}


def missing_extra(exc: ImportError) -> ImportError:
    """The error to raise when the tracing dependencies are not installed."""
    return ImportError(
        f"Composo tracing needs OpenTelemetry and OpenInference ({exc.name or exc} is missing): "
        "pip install 'composo[tracing]'"
    )


@runtime_checkable
class Instrument(Protocol):
    """Something that makes a library emit OpenInference spans to a tracer provider."""

    name: str

    def instrument(self, tracer_provider: Any) -> None: ...

    def uninstrument(self) -> None: ...


def attribute_name(name: str) -> str:
    """``Instruments`` attribute for an instrument name: ``"llama-index"`` -> ``LLAMA_INDEX``."""
    return name.strip().upper().replace("-", "_").replace(".", "_").replace(" ", "_")


class OpenInferenceInstrument:
    """An OpenInference instrumentor (``module.class_name``) as an instrument: switched on for
    the given tracer provider, off again with ``uninstrument``. Integrations subclass it."""

    name = ""
    module = ""
    class_name = ""
    install = "composo[tracing]"  # what to install when the instrumentor is missing

    def __init__(self) -> None:
        self._instrumentor: Any = None

    def __repr__(self) -> str:
        return f"Instruments.{attribute_name(self.name)}"

    def instrument(self, tracer_provider: Any) -> None:
        try:
            instrumentor = getattr(importlib.import_module(self.module), self.class_name)()
        except ImportError as exc:
            raise ImportError(
                f"{self!r} needs {self.module}.{self.class_name} ({exc.name or exc} is missing): "
                f"pip install '{self.install}'"
            ) from exc
        if instrumentor.is_instrumented_by_opentelemetry:
            # Already switched on by the application (e.g. for its own exporter); its spans reach
            # the tracer provider it chose, which ComposoTracer listens to when it is global.
            _log.info("%s is already instrumented; using its spans", self.name)
            return
        instrumentor.instrument(tracer_provider=tracer_provider)
        self._instrumentor = instrumentor

    def uninstrument(self) -> None:
        if self._instrumentor is not None:
            self._instrumentor.uninstrument()
            self._instrumentor = None


class OpenAIInstrument(OpenInferenceInstrument):
    """The ``openai`` client (sync and async; Chat Completions and Responses)."""

    name = "openai"
    module = "openinference.instrumentation.openai"
    class_name = "OpenAIInstrumentor"


class EntryPointInstrument(OpenInferenceInstrument):
    """An installed OpenInference instrumentor, found through its package's entry point."""

    def __init__(self, name: str, target: str, install: str) -> None:
        super().__init__()
        self.name = name
        self.module, _, self.class_name = target.partition(":")
        self.install = _PROVIDED_BY.get(attribute_name(name), install)


class InstrumentorInstrument:
    """Any OpenTelemetry/OpenInference instrumentor object (``instrument(tracer_provider=...)``,
    ``uninstrument()``) as an instrument."""

    def __init__(self, instrumentor: Any, name: str | None = None) -> None:
        self.instrumentor = instrumentor
        self.name = name or type(instrumentor).__name__.removesuffix("Instrumentor").lower()
        self._mine = False

    def __repr__(self) -> str:
        return f"Instruments.wrap({type(self.instrumentor).__name__}())"

    def instrument(self, tracer_provider: Any) -> None:
        if getattr(self.instrumentor, "is_instrumented_by_opentelemetry", False):
            _log.info("%s is already instrumented; using its spans", self.name)
            return
        self.instrumentor.instrument(tracer_provider=tracer_provider)
        self._mine = True

    def uninstrument(self) -> None:
        if self._mine:
            self.instrumentor.uninstrument()
            self._mine = False


def integration_names() -> set[str]:
    """``Instruments`` names that Composo's own integration packages provide."""
    return {k for k, pkg in _PROVIDED_BY.items() if not pkg.startswith("composo[")}


class _Instruments:
    """``Instruments.OPENAI`` and, when their packages are installed, ``Instruments.ANTHROPIC``,
    ``Instruments.LITELLM``, ``Instruments.OPENAI_AGENTS`` (any OpenInference instrumentor),
    ``Instruments.LANGCHAIN``, ``Instruments.LLAMA_INDEX`` or any instrument a plugin adds."""

    OPENAI: Instrument

    def __init__(self) -> None:
        self.OPENAI = OpenAIInstrument()

    def available(self) -> dict[str, Instrument]:
        """Every instrument that can be switched on now, by attribute name."""
        found: dict[str, Instrument] = {"OPENAI": self.OPENAI}
        for answer in get_plugin_manager().hook.composo_instruments():
            for inst in answer or ():
                if isinstance(inst, Instrument):
                    found.setdefault(attribute_name(inst.name), inst)
                else:
                    _log.warning("ignoring %r from composo_instruments: not an Instrument", inst)
        return found

    def wrap(self, instrumentor: Any, name: str | None = None) -> Instrument:
        """Any OpenInference (or OpenTelemetry) instrumentor object as an instrument.

        Args:
            instrumentor: E.g. ``CrewAIInstrumentor()``: anything with
                ``instrument(tracer_provider=...)`` and ``uninstrument()``.
            name: What ``ComposoTracer.instrumented()`` calls it (default: from its class).

        Returns:
            The instrument, for ``ComposoTracer.init(instruments=...)``.

        Raises:
            ComposoValidationError: ``instrumentor`` has no ``instrument`` / ``uninstrument``.
        """
        from composo.errors import ComposoValidationError

        if isinstance(instrumentor, Instrument):
            return instrumentor
        if not (
            callable(getattr(instrumentor, "instrument", None))
            and callable(getattr(instrumentor, "uninstrument", None))
        ):
            raise ComposoValidationError(
                f"instrumentor: {instrumentor!r} has no instrument()/uninstrument() methods; pass "
                "an OpenInference instrumentor such as AnthropicInstrumentor()"
            )
        return InstrumentorInstrument(instrumentor, name)

    def __getattr__(self, attr: str) -> Instrument:
        if attr.startswith("_"):
            raise AttributeError(attr)
        available = self.available()
        key = attribute_name(attr)
        if key in available:
            return available[key]
        hint = f" Install {_PROVIDED_BY[key]} to add it." if key in _PROVIDED_BY else ""
        more = [f"{pkg} ({name})" for name, pkg in _PROVIDED_BY.items() if name not in available]
        raise AttributeError(
            f"Instruments.{attr} is not available.{hint} Available: "
            f"{', '.join(sorted(available))}."
            + (f" Packages adding more: {', '.join(more)}." if more else "")
        )

    def __dir__(self) -> list[str]:
        return sorted({*super().__dir__(), *self.available()})

    def __repr__(self) -> str:
        return f"Instruments({', '.join(sorted(self.available()))})"


Instruments = _Instruments()
