"""Evaluate an OpenAI Responses API answer that used built-in tools (web search, code).

Needs OPENAI_API_KEY (and OPENAI_BASE_URL for anything but OpenAI itself) besides the Composo
variables. Pass the Response object itself as result=, and the same input= you sent to OpenAI.
"""

import os
import sys

if not os.environ.get("OPENAI_API_KEY"):
    # Any OpenAI-compatible endpoint works: set OPENAI_BASE_URL to it as well.
    print(
        "this example calls OpenAI: set OPENAI_API_KEY (and OPENAI_BASE_URL for an "
        "OpenAI-compatible endpoint), plus COMPOSO_API_KEY or COMPOSO_BASE_URL",
        file=sys.stderr,
    )
    sys.exit(2)


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
