"""A LlamaIndex LLM that calls the OpenAI client, traced with both ``Instruments.LLAMA_INDEX``
and ``Instruments.OPENAI``: each model call is one interaction, not two (the LlamaIndex event and
the OpenAI span describe the same call)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import PrivateAttr

from composo.tracing import AgentTracer, ComposoTracer, Instruments
from tests.support.lazy import lazy_import
from tests.support.openai_standin import OpenAIStandIn, chat_completion

if TYPE_CHECKING:
    from llama_index.core.llms.custom import CustomLLM

openai = lazy_import("openai")


def openai_backed_llm(base_url: str) -> CustomLLM:
    """A LlamaIndex LLM whose calls go through the real ``openai`` client."""
    from llama_index.core.base.llms.types import (
        ChatMessage,
        ChatResponse,
        CompletionResponse,
        CompletionResponseGen,
        LLMMetadata,
    )
    from llama_index.core.llms.callbacks import llm_chat_callback, llm_completion_callback
    from llama_index.core.llms.custom import CustomLLM

    class OpenAIBackedLLM(CustomLLM):
        base_url: str
        _client: Any = PrivateAttr(default=None)

        @property
        def metadata(self) -> LLMMetadata:
            return LLMMetadata(is_chat_model=True, model_name="gpt-4o-mini")

        def _openai(self) -> openai.OpenAI:
            if self._client is None:
                self._client = openai.OpenAI(base_url=self.base_url, api_key="k", max_retries=0)
            return self._client

        @llm_chat_callback()
        def chat(self, messages: Any, **kwargs: Any) -> ChatResponse:
            sent = [{"role": m.role.value, "content": m.content or ""} for m in messages]
            done = self._openai().chat.completions.create(model="gpt-4o-mini", messages=sent)
            text = done.choices[0].message.content or ""
            return ChatResponse(message=ChatMessage(role="assistant", content=text))

        @llm_completion_callback()
        def complete(
            self, prompt: str, formatted: bool = False, **kwargs: Any
        ) -> CompletionResponse:
            return CompletionResponse(
                text=self.chat([ChatMessage(role="user", content=prompt)]).message.content or ""
            )

        @llm_completion_callback()
        def stream_complete(
            self, prompt: str, formatted: bool = False, **kwargs: Any
        ) -> CompletionResponseGen:
            raise NotImplementedError

    return OpenAIBackedLLM(base_url=base_url)


def test_llamaindex_and_openai_instruments_count_each_call_once(
    openai_standin: OpenAIStandIn,
) -> None:
    from llama_index.core.base.llms.types import ChatMessage

    openai_standin.queue_chat(
        chat_completion("one"), chat_completion("two"), chat_completion("direct")
    )
    llm = openai_backed_llm(openai_standin.base_url)
    ComposoTracer.init([Instruments.LLAMA_INDEX, Instruments.OPENAI])
    try:
        with AgentTracer("concierge") as tracer:
            llm.chat([ChatMessage(role="user", content="hi")])
            llm.chat([ChatMessage(role="user", content="again")])
            # a plain OpenAI call beside them is its own interaction
            llm._openai().chat.completions.create(
                model="gpt-4o-mini", messages=[{"role": "user", "content": "direct?"}]
            )
    finally:
        ComposoTracer.shutdown()
    [agent] = tracer.trace.agent_instance_by_id.values()
    answers = [step.output_messages[0].content for step in agent.interactions]
    assert answers == ["one", "two", "direct"]
