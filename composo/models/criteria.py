"""The platform SDK's ``composo.models.criteria``: the same strings and lists as
:mod:`composo.criteria` (import from there in new code)."""

from __future__ import annotations

from composo.criteria import (
    agent,
    agent_exploitation,
    agent_exploration,
    agent_faithfulness,
    agent_goal_pursuit,
    agent_tool_use,
    rag,
    rag_completeness,
    rag_faithfulness,
    rag_precision,
    rag_relevance,
)

__all__ = [
    "agent",
    "agent_exploitation",
    "agent_exploration",
    "agent_faithfulness",
    "agent_goal_pursuit",
    "agent_tool_use",
    "rag",
    "rag_completeness",
    "rag_faithfulness",
    "rag_precision",
    "rag_relevance",
]
