"""Evaluate a LangChain agent while it runs, with ComposoCallback.

One callback scores every model call (mode="llm"), another scores each whole run as a trace
(mode="trace"). Both work in the background: the agent answers at full speed, and flush() waits
for the scores.

Needs langchain-composo and langchain (from a checkout:
pip install -e integrations/langchain langchain) and COMPOSO_API_KEY (plus COMPOSO_BASE_URL
for a local server: `composo serve`).
The model here is LangChain's scripted fake so the example runs anywhere; put your own chat model
(e.g. ChatOpenAI) in its place.
"""

from typing import Any

from _install import needs

from composo import criteria

with needs(__doc__):  # without them: one line saying what to install, exit 2
    from langchain.agents import create_agent
    from langchain_composo import ComposoCallback
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage, HumanMessage
    from langchain_core.tools import tool
    from langchain_core.utils.function_calling import convert_to_openai_tool


@tool
def get_weather(city: str) -> str:
    """Current weather for a city."""
    return {"paris": "18C and sunny", "oslo": "4C and raining"}.get(city.lower(), "unknown")


class ScriptedModel(GenericFakeChatModel):
    """Stand-in for a real chat model: replays the answers below and accepts tools."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self.bind(tools=[convert_to_openai_tool(t) for t in tools], **kwargs)


model = ScriptedModel(
    messages=iter(
        [
            AIMessage(
                "", tool_calls=[{"name": "get_weather", "args": {"city": "Paris"}, "id": "1"}]
            ),
            AIMessage("It is 18C and sunny in Paris: no umbrella needed."),
        ]
    )
)
agent = create_agent(
    model, tools=[get_weather], name="weather_agent", system_prompt="Answer weather questions."
)

# One callback per request is fine: callbacks share one background thread, and `with` flushes
# and closes on exit.
with (
    ComposoCallback(criteria=[criteria.tool_selection, criteria.tool_result_use]) as per_call,
    ComposoCallback(
        criteria="Reward agents that answer the question using the tool results",
        mode="trace",
        tags={"app": "weather-demo"},
    ) as per_run,
):
    result = agent.invoke(
        {"messages": [HumanMessage("Do I need an umbrella in Paris today?")]},
        config={"callbacks": [per_call, per_run]},
    )
    print("Agent:", result["messages"][-1].content)

for record in per_call.results + per_run.results:
    outcome = f"{record.score:.2f}" if record.score is not None else f"error: {record.error}"
    print(f"[{record.kind} {record.name}] {record.criterion[:50]}... -> {outcome}")
    print(f"    evaluated: {record.summary}")
