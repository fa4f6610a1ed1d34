"""Composo evaluation for LangChain and LangGraph: ``ComposoCallback`` scores model calls or whole
agent runs in the background. Installed, it is also a ``composo`` plugin that reads LangChain
messages, prompt values, results and tools. Names load on first use: the plugin module is
imported in every composo process and must not import LangChain.
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
