"""Evaluate a tool-using conversation, with the tool definitions the model had."""

from composo import Composo

client = Composo()

messages = [
    {"role": "user", "content": "What's the weather in SF?"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_123",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"location": "San Francisco"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call_123", "content": '{"temp": 65, "condition": "sunny"}'},
    {"role": "assistant", "content": "It's 65°F and sunny in San Francisco!"},
]

tools = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Get current weather for a location",
            "parameters": {"type": "object", "properties": {"location": {"type": "string"}}},
        },
    }
]

result = client.evaluate(
    messages=messages, tools=tools, criteria="Reward correct tool usage and accurate responses"
)

print(f"Score: {result.score}")
print(f"Explanation: {result.explanation}")
