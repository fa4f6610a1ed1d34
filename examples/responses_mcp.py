"""Evaluate an OpenAI Responses API answer that called a remote MCP server.

Needs the OpenAI variables _openai_key.py checks, besides the Composo ones.
"""

from _openai_key import require_openai_key

require_openai_key()  # without OPENAI_API_KEY: one line saying what to set, exit 2


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
