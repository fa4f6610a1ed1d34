"""Composo evaluation for LangChain and LangGraph.

``ComposoCallback`` scores model calls or whole agent runs from a callback, in the background.
Installing the package also lets ``composo`` read LangChain messages, prompt values, results and
tools directly (through the ``composo`` entry point; no import needed).

Names load on first use: the ``composo`` plugin manager imports ``langchain_composo.adapters``
in every process, and that must not import LangChain.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from composo.ext import lazy_exports

if TYPE_CHECKING:
    from composo.ext import EvaluationRecord
    from langchain_composo.callback import ComposoCallback

__all__ = ["ComposoCallback", "EvaluationRecord"]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {"ComposoCallback": "langchain_composo.callback", "EvaluationRecord": "composo.ext"},
)
