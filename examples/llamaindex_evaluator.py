"""Composo in a LlamaIndex project: RAG evaluators in BatchEvalRunner, a chat history passed
straight to the client, and an agent run captured as a trace.

Needs llama-index-evaluation-composo (from a checkout: pip install -e integrations/llamaindex)
Uses COMPOSO_API_KEY / COMPOSO_BASE_URL when set; otherwise starts the local Composo server
(the server extra: pip install -e '.[server]'). The LLMs here are LlamaIndex's mock models, so
it runs offline.
"""

from __future__ import annotations

import asyncio
import contextlib
import os

from _install import needs

from composo import Composo, criteria

with needs(__doc__):  # without them: one line saying what to install, exit 2
    from llama_index.core import Document, VectorStoreIndex
    from llama_index.core.agent.workflow import FunctionAgent
    from llama_index.core.base.llms.types import ChatMessage, ToolCallBlock
    from llama_index.core.embeddings import MockEmbedding
    from llama_index.core.evaluation import BatchEvalRunner
    from llama_index.core.llms import MockLLM
    from llama_index.core.llms.mock import MockFunctionCallingLLM
    from llama_index.evaluation.composo import (
        ComposoFaithfulnessEvaluator,
        ComposoGoalPursuitEvaluator,
        ComposoRelevancyEvaluator,
        LlamaIndexTraceCapture,
    )


def rag_batch() -> None:
    docs = [
        Document(text="The Eiffel Tower is 330 metres tall and stands in Paris."),
        Document(text="The Colosseum in Rome held about 50,000 spectators."),
        Document(text="Big Ben is the nickname of the great bell in London."),
    ]
    index = VectorStoreIndex.from_documents(docs, embed_model=MockEmbedding(embed_dim=8))
    engine = index.as_query_engine(llm=MockLLM(max_tokens=24), similarity_top_k=2)

    # Retrieved nodes reach Composo as source material, so faithfulness can be judged.
    runner = BatchEvalRunner(
        {"faithfulness": ComposoFaithfulnessEvaluator(), "relevancy": ComposoRelevancyEvaluator()},
        workers=4,
    )
    questions = ["How tall is the Eiffel Tower?", "How many people did the Colosseum hold?"]
    results = runner.evaluate_queries(engine, queries=questions)
    for name, rows in results.items():
        for row in rows:
            status = row.invalid_reason if row.invalid_result else f"score {row.score}"
            print(f"{name:<12} {row.query!r}: {status}, passing={row.passing}")


def chat_history() -> None:
    # With the package installed, the client takes LlamaIndex messages as they are.
    history = [
        ChatMessage(role="user", content="What's the capital of France?"),
        ChatMessage(role="assistant", content="The capital of France is Paris."),
    ]
    result = Composo().evaluate(messages=history, criteria="Reward accurate answers")
    print(f"chat history: score {result.score}")


def weather(city: str) -> str:
    """Current weather for a city."""
    return f"sunny, 24 degrees in {city}"


def scripted_llm() -> MockFunctionCallingLLM:
    """Calls the weather tool once, then answers from its result (a stand-in for a real model)."""

    def reply(messages: list[ChatMessage], **kwargs: object) -> ChatMessage:
        results = [m for m in messages if m.role == "tool"]
        if results:
            return ChatMessage(role="assistant", content=f"It is {results[-1].content}.")
        return ChatMessage(
            role="assistant",
            blocks=[
                ToolCallBlock(tool_call_id="c1", tool_name="weather", tool_kwargs={"city": "Paris"})
            ],
        )

    return MockFunctionCallingLLM(response_generator=reply)


async def agent_trace() -> None:
    agent = FunctionAgent(name="weather_agent", tools=[weather], llm=scripted_llm())
    with LlamaIndexTraceCapture() as capture:
        await agent.run("What's the weather in Paris?")

    verdict = Composo().evaluate_trace(capture.trace, criteria=criteria.tool_result_use)
    print(f"agent trace: overall score {verdict.overall_score}")

    # The same, as a LlamaIndex evaluator.
    result = await ComposoGoalPursuitEvaluator().aevaluate(trace=capture)
    print(f"goal pursuit: score {result.score}, passing={result.passing}")


def main() -> None:
    with contextlib.ExitStack() as stack:
        if not os.environ.get("COMPOSO_API_KEY"):
            from composo.server import LocalServer

            srv = stack.enter_context(LocalServer())
            os.environ.update(COMPOSO_API_KEY=srv.api_key, COMPOSO_BASE_URL=srv.base_url)
        rag_batch()
        chat_history()
        asyncio.run(agent_trace())


if __name__ == "__main__":
    main()
