"""A call-centre transcript type that Composo learns to evaluate through a plugin."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Transcript:
    """Alternating turns, customer first, as a call-centre tool might export them."""

    turns: list[str] = field(default_factory=list)
