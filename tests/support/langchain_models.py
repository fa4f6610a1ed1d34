"""LangChain chat models and a tool for the LangChain tests, in a module of their own so that
test modules can import it lazily (LangChain's import is costly at collection)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import tool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import Field


class ToolCallingFakeChat(GenericFakeChatModel):
    """LangChain's fake chat model, plus ``bind_tools`` as real providers implement it."""

    def bind_tools(
        self, tools: Sequence[Any], *, tool_choice: str | None = None, **kwargs: Any
    ) -> Runnable[Any, AIMessage]:
        return self.bind(tools=[convert_to_openai_tool(t) for t in tools], **kwargs)


class EchoChat(GenericFakeChatModel):
    """Answers each question by quoting it, so concurrent runs can be told apart."""

    messages: Iterator[AIMessage | str] = Field(default_factory=lambda: iter(()))

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        question = messages[-1].content
        return ChatResult(generations=[ChatGeneration(message=AIMessage(f"You asked: {question}"))])


class BrokenChat(BaseChatModel):
    """A chat model whose provider always fails."""

    @property
    def _llm_type(self) -> str:
        return "broken"

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        raise RuntimeError("provider is down")


@tool
def get_weather(city: str) -> str:
    """Current weather for a city."""
    return f"Sunny and 21C in {city}"
