"""Evaluate an OpenAI Responses API answer that called a remote MCP server.

Needs OPENAI_API_KEY (and OPENAI_BASE_URL for anything but OpenAI itself) besides the Composo
variables.
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

MCP_TOOL = {
    "type": "mcp",
    "server_label": "coingecko",
    "server_url": "https://mcp.api.coingecko.com/mcp",
    "require_approval": "never",
}

input_text = "What are the current prices of Bitcoin and Ethereum in USD?"

response = openai_client.responses.create(
    model="gpt-4.1",
    input=input_text,
    tools=[MCP_TOOL],
)

result = composo_client.evaluate(
    input=input_text,
    result=response,
    criteria=(
        "Reward responses that use the MCP tool to retrieve live cryptocurrency prices "
        "and present them clearly"
    ),
)

print(f"Score: {result.score}")
print(f"Explanation: {result.explanation}")
