"""The module path ``composo.ext`` names for ``current_tracer`` and ``record_interaction``."""

from composo.tracing._agent import current_tracer, record_interaction

__all__ = ["current_tracer", "record_interaction"]
