"""Evaluate an OpenAI Responses API answer that used built-in tools (web search, code).

Pass the Response object itself as result=, and the same input= you sent to OpenAI (which needs
the variables _openai_key.py checks).
"""

from _openai_key import require_openai_key

require_openai_key()  # without OPENAI_API_KEY: one line saying what to set, exit 2


from openai import OpenAI

from composo import Composo

openai_client = OpenAI()
composo_client = Composo()

input_text = (
    "Search the web for the latest news story on SpaceX and write a Python script "
    "to plot their latest 3 launch dates"
)

response = openai_client.responses.create(
    model="gpt-4.1",
    input=input_text,
    tools=[
        {"type": "web_search"},
        {"type": "code_interpreter", "container": {"type": "auto"}},
    ],
)

result = composo_client.evaluate(
    input=input_text,
    result=response,
    criteria="Reward responses that search the web and produce Python code based on the results",
)

print(f"Score: {result.score}")
print(f"Explanation: {result.explanation}")
