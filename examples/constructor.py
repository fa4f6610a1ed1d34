"""The reference's constructor examples: ways to create a client.

The keys here are the reference's placeholders; the last part sends one evaluation with the
client built last, so point COMPOSO_BASE_URL at a server that accepts them (for instance the
local server started without --api-key).
"""

import os

from composo import Composo

client = Composo(
    api_key="your_api_key",
    base_url="https://platform.composo.ai",
    num_retries=1,
    model_core=None,
    timeout=60.0,
)

# Using API key directly
client = Composo(api_key="your_api_key_here")

# Using environment variable
os.environ["COMPOSO_API_KEY"] = "your_api_key_here"
client = Composo()

# With custom configuration
client = Composo(api_key="your_api_key", num_retries=3, timeout=120.0)

# Use the client (not part of the reference's snippet)
result = client.evaluate(
    messages=[
        {"role": "user", "content": "Is water wet?"},
        {"role": "assistant", "content": "Yes: water makes surfaces it touches wet."},
    ],
    criteria="Reward accurate and informative responses",
)
print(f"Score: {result.score}")
