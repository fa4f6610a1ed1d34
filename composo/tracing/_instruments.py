"""What ``ComposoTracer.init`` can switch on: an ``Instruments`` member (the platform SDK's values)
resolves to an *instrument* (``name``, ``instrument(tracer_provider)``, ``uninstrument()``): an
OpenInference instrumentor, one of Composo's own, or a plugin's (``composo_instruments`` hook).
Nothing optional is imported until an instrument is switched on.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import threading
from enum import Enum
from typing import Any, Protocol, runtime_checkable

from composo._core.hookspecs import hookspec
from composo._core.plugins import add_hookspecs, get_plugin_manager
from composo.errors import ComposoValidationError

__all__ = [
    "EntryPointInstrument",
    "Hookspecs",
    "Instrument",
    "InstrumentorInstrument",
    "Instruments",
    "OpenInferenceInstrument",
    "PydanticAIInstrument",
    "attribute_name",
    "missing_extra",
]

ENTRY_POINT_GROUP = "openinference_instrumentor"

_log = logging.getLogger("composo.tracing")


class Hookspecs:
    """Tracing's own hook, declared by this package (the core knows nothing of tracing)."""

    @hookspec
    def composo_instruments(self) -> list[Any] | None:
        """Tracing instruments this plugin adds: objects with ``name``,
        ``instrument(tracer_provider)`` and ``uninstrument()``. ``ComposoTracer.init`` takes
        them as objects or by name, and an ``Instruments`` member of the same name resolves to
        them."""


add_hookspecs(Hookspecs)


def missing_extra(exc: ImportError) -> ImportError:
    """The error to raise when the tracing dependencies are not installed."""
    return ImportError(
        f"Composo tracing needs OpenTelemetry and OpenInference ({exc.name or exc} is missing): "
        "pip install 'composo[tracing]'"
    )


@runtime_checkable
class Instrument(Protocol):
    """Something that makes a library emit spans (OpenInference, or by the OpenTelemetry GenAI
    conventions) to a tracer provider."""

    name: str

    def instrument(self, tracer_provider: Any) -> None: ...

    def uninstrument(self) -> None: ...


def attribute_name(name: str) -> str:
    """``Instruments`` member name for an instrument name: ``"llama-index"`` -> ``LLAMA_INDEX``."""
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
        return f"{type(self).__name__}({self.name!r})"

    def load(self) -> Any:
        """Import the instrumentor class (``ImportError`` naming what to install if missing)."""
        try:
            return getattr(importlib.import_module(self.module), self.class_name)
        except ImportError as exc:
            key = attribute_name(self.name)
            label = f"Instruments.{key}" if key in Instruments.__members__ else repr(self.name)
            raise ImportError(
                f"{label} needs {self.module}.{self.class_name} ({exc.name or exc} is missing): "
                f"pip install '{self.install}'"
            ) from exc

    def instrument(self, tracer_provider: Any) -> None:
        instrumentor = self.load()()
        if getattr(instrumentor, "is_instrumented_by_opentelemetry", False):
            # the application instrumented it: its spans reach the provider it chose
            _log.info("%s is already instrumented; using its spans", self.name)
            return
        instrumentor.instrument(tracer_provider=tracer_provider)
        self._instrumentor = instrumentor

    def uninstrument(self) -> None:
        if self._instrumentor is not None:
            self._instrumentor.uninstrument()
            self._instrumentor = None


class EntryPointInstrument(OpenInferenceInstrument):
    """An OpenInference instrumentor at ``target`` (``"module:Class"``), e.g. one found through
    its package's entry point."""

    def __init__(self, name: str, target: str, install: str) -> None:
        super().__init__()
        self.name = name
        self.module, _, self.class_name = target.partition(":")
        self.install = install


class InstrumentorInstrument(OpenInferenceInstrument):
    """Any OpenTelemetry/OpenInference instrumentor object (``instrument(tracer_provider=...)``,
    ``uninstrument()``) as an instrument."""

    def __init__(self, instrumentor: Any, name: str | None = None) -> None:
        super().__init__()
        self.instrumentor = instrumentor
        self.name = name or type(instrumentor).__name__.removesuffix("Instrumentor").lower()

    def __repr__(self) -> str:
        return f"Instruments.wrap({type(self.instrumentor).__name__}())"

    def load(self) -> Any:
        return lambda: self.instrumentor


class PydanticAIInstrument(OpenInferenceInstrument):
    """PydanticAI's own instrumentation (GenAI conventions): ``Agent.instrument_all`` with the
    tracer provider. Agents given ``instrument=`` keep it; an application's own ``instrument_all``
    settings are replaced while this is on (PydanticAI offers no way to read them back)."""

    name = "pydantic_ai"
    module = "pydantic_ai"
    class_name = "Agent"
    install = "composo[pydantic-ai]"

    def instrument(self, tracer_provider: Any) -> None:
        agent = self.load()
        settings = importlib.import_module("pydantic_ai.models.instrumented")
        agent.instrument_all(settings.InstrumentationSettings(tracer_provider=tracer_provider))
        self._instrumentor = agent

    def uninstrument(self) -> None:
        if self._instrumentor is not None:
            self._instrumentor.instrument_all(False)
            self._instrumentor = None


_OI = "openinference.instrumentation."
_PACKAGE = "openinference-instrumentation-"

# Each member's instrumentor ("module:Class"), or None when Composo's integration package
# provides it as a plugin; and what to install.
_SOURCES: dict[str, tuple[str | None, str]] = {
    "OPENAI": (_OI + "openai:OpenAIInstrumentor", "composo[tracing]"),
    "ANTHROPIC": (_OI + "anthropic:AnthropicInstrumentor", "composo[anthropic]"),
    "GOOGLE_GENAI": (_OI + "google_genai:GoogleGenAIInstrumentor", "composo[google-genai]"),
    "LANGCHAIN": (None, "langchain-composo[tracing]"),
    "LLAMA_INDEX": (None, "llama-index-evaluation-composo"),
    "LITELLM": (_OI + "litellm:LiteLLMInstrumentor", "composo[litellm]"),
    # the SDK's own trace processors, not OpenInference's (composo/tracing/_openai_agents.py)
    "OPENAI_AGENTS": ("composo.tracing._openai_agents:AgentsSDKCapture", "composo[agents]"),
    "GOOGLE_ADK": (_OI + "google_adk:GoogleADKInstrumentor", _PACKAGE + "google-adk"),
    "CREWAI": (_OI + "crewai:CrewAIInstrumentor", _PACKAGE + "crewai"),
    "DSPY": (_OI + "dspy:DSPyInstrumentor", _PACKAGE + "dspy"),
    "SMOLAGENTS": (_OI + "smolagents:SmolagentsInstrumentor", _PACKAGE + "smolagents"),
    "BEDROCK": (_OI + "bedrock:BedrockInstrumentor", _PACKAGE + "bedrock"),
    "HAYSTACK": (_OI + "haystack:HaystackInstrumentor", _PACKAGE + "haystack"),
    # the framework's own GenAI-convention spans, switched on by Composo (_OWN below)
    "PYDANTIC_AI": ("pydantic_ai:Agent", "composo[pydantic-ai]"),
}
# Members whose instrument is one of Composo's own rather than an OpenInference instrumentor.
_OWN: dict[str, type[OpenInferenceInstrument]] = {"PYDANTIC_AI": PydanticAIInstrument}

_builtin: dict[str, OpenInferenceInstrument] = {}
_builtin_lock = threading.Lock()


def member_instrument(key: str) -> OpenInferenceInstrument | None:
    """The one instrument of a member that has an OpenInference instrumentor of its own (the same
    object each time, so ``ComposoTracer.init`` sees it as on), else ``None``."""
    target, install = _SOURCES.get(key, (None, ""))
    if target is None:
        return None
    with _builtin_lock:
        if key not in _builtin:
            own = _OWN.get(key)
            _builtin[key] = own() if own else EntryPointInstrument(key.lower(), target, install)
        return _builtin[key]


def plugin_provided() -> set[str]:
    """Member names whose instrument a plugin (Composo's integration packages) provides."""
    return {key for key, (target, _) in _SOURCES.items() if target is None}


class Instruments(Enum):
    """The frameworks ``ComposoTracer.init(instruments=...)`` can trace, by name (the first three
    as in the platform SDK). ``init`` resolves a member when called and raises ``ImportError``
    naming what to install when its package is missing.
    """

    OPENAI = "openai"
    ANTHROPIC = "anthropic"
    GOOGLE_GENAI = "google_genai"
    LANGCHAIN = "langchain"
    LLAMA_INDEX = "llama_index"
    LITELLM = "litellm"
    OPENAI_AGENTS = "openai_agents"
    GOOGLE_ADK = "google_adk"
    CREWAI = "crewai"
    DSPY = "dspy"
    SMOLAGENTS = "smolagents"
    BEDROCK = "bedrock"
    HAYSTACK = "haystack"
    PYDANTIC_AI = "pydantic_ai"

    @classmethod
    def _missing_(cls, value: object) -> Instruments | None:
        # Instruments("llama-index"), Instruments("OpenAI"): any spelling of a member's name.
        if isinstance(value, str):
            return cls.__members__.get(attribute_name(value))
        return None

    def resolve(self) -> Instrument:
        """The instrument this member stands for here: a plugin's of this name, else the
        member's own; ``ImportError`` naming what to install when it is missing."""
        found = Instruments.available().get(self.name)
        if found is not None:
            return found
        own = member_instrument(self.name)
        if own is None:
            install = _SOURCES[self.name][1]
            raise ImportError(
                f"Instruments.{self.name} comes with {install.partition('[')[0]}: "
                f"pip install '{install}'"
            )
        own.load()
        return own

    @staticmethod
    def available() -> dict[str, Instrument]:
        """Every instrument that can be switched on now, by upper-case name (``OPENAI``, each
        installed OpenInference instrumentor, what plugins add), for ``init`` as is or by name."""
        found: dict[str, Instrument] = {}
        for key in ("OPENAI", *_OWN):
            own = member_instrument(key)
            module = (_SOURCES[key][0] or "").partition(":")[0]
            if own is not None and (key == "OPENAI" or importlib.util.find_spec(module)):
                found[key] = own
        for answer in get_plugin_manager().hook.composo_instruments():
            for inst in answer or ():
                if isinstance(inst, Instrument):
                    found.setdefault(attribute_name(inst.name), inst)
                else:
                    _log.warning("ignoring %r from composo_instruments: not an Instrument", inst)
        return found

    @staticmethod
    def wrap(instrumentor: Any, name: str | None = None) -> Instrument:
        """Any OpenInference (or OpenTelemetry) instrumentor object as an instrument.

        Args:
            instrumentor: E.g. ``CrewAIInstrumentor()``: anything with
                ``instrument(tracer_provider=...)`` and ``uninstrument()``.
            name: What ``ComposoTracer.instrumented()`` calls it (default: from its class).

        Returns:
            The instrument, for ``ComposoTracer.init(instruments=...)`` (which also takes the
            instrumentor object itself).

        Raises:
            ComposoValidationError: ``instrumentor`` has no ``instrument`` / ``uninstrument``.
        """
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


def by_name(name: str) -> Instrument:
    """The instrument a string names: a member's value or name in any spelling (``"openai"``,
    ``"llama-index"``), or any available instrument's name (else ``ComposoValidationError``)."""
    member = Instruments.__members__.get(attribute_name(name))
    if member is not None:
        return member.resolve()
    here = Instruments.available()
    found = here.get(attribute_name(name))
    if found is None:
        names = sorted({m.value for m in Instruments} | {n.lower() for n in here})
        raise ComposoValidationError(
            f"instruments: no instrument is named {name!r}; use an Instruments member or one of "
            f"{', '.join(repr(n) for n in names)}"
        )
    return found
