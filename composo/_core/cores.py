"""The model cores the platform serves, without pydantic: the clients check ``model_core=``
against these at construction, before any model class is loaded; :mod:`composo._core.wire`
takes its ``ModelCore`` type and its rule from here."""

from __future__ import annotations

from typing import Literal

ModelCore = Literal[
    "align-20251111",
    "align-20250529",
    "align-20260109",
    "align-lightning-20251127",
    "align-lightning-20250731",
]
MODEL_CORES: tuple[str, ...] = ModelCore.__args__  # type: ignore[attr-defined]
# Lightning cores evaluate only the latest response of a conversation, only against binary
# criteria, and never a trace (the rules are the wire models', composo._core.wire).
LIGHTNING_MODEL_CORES = frozenset(c for c in MODEL_CORES if "lightning" in c)


def check_model_core(model_core: object, error: type[Exception] = ValueError) -> str | None:
    """``None`` or one of :data:`MODEL_CORES`, or ``error`` listing them."""
    if model_core is not None and model_core not in MODEL_CORES:
        raise error(
            f"model_core: {model_core!r} is not a model core; use one of {', '.join(MODEL_CORES)}"
        )
    return None if model_core is None else str(model_core)
