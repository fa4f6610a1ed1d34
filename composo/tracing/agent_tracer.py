"""``composo.tracing.agent_tracer``: the platform SDK's module path for ``AgentTracer`` (and its
``agent_tracer`` decorator); both live in ``composo.tracing``."""

from __future__ import annotations

from composo.tracing._agent import AgentTracer, agent_tracer

__all__ = ["AgentTracer", "agent_tracer"]
