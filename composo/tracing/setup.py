"""``composo.tracing.setup``: the platform SDK's module path for ``init``, which is
``ComposoTracer.init`` with that SDK's argument name and default (no instruments)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from composo.tracing._tracer import ComposoTracer

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider

    from composo.tracing._instruments import Instrument, Instruments

__all__ = ["init"]


def init(
    instrument: Instruments
    | str
    | Instrument
    | Iterable[Instruments | str | Instrument]
    | Any = None,
) -> TracerProvider:
    """Start tracing, switching on ``instrument``: what ``ComposoTracer.init(instruments=...)``
    takes (``None``: none). Returns the tracer provider the instrumented calls' spans go to."""
    return ComposoTracer.init(instruments=[] if instrument is None else instrument)
