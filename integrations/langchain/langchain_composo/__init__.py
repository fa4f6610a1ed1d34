"""Composo evaluation for LangChain and LangGraph.

``ComposoCallback`` scores model calls or whole agent runs from a callback, in the background.
Installing the package also lets ``composo`` read LangChain messages, prompt values, results and
tools directly (through the ``composo`` entry point; no import needed).

Names load on first use: the ``composo`` plugin manager imports ``langchain_composo.adapters``
in every process, and that must not import LangChain.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from composo.ext import EvaluationRecord
    from langchain_composo.callback import ComposoCallback

__all__ = ["ComposoCallback", "EvaluationRecord"]

_LAZY = {
    "ComposoCallback": "langchain_composo.callback",
    "EvaluationRecord": "composo.ext",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'langchain_composo' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
