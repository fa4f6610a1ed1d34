"""Capture an agent's OpenAI calls as a trace and evaluate it.

Needs the tracing extra (pip install 'composo[tracing]') and OPENAI_API_KEY (and OPENAI_BASE_URL
for anything but OpenAI itself) besides the Composo variables.
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


from composo import Composo, ComposoTracer, Instruments, AgentTracer  # noqa: I001
from openai import OpenAI

# Initialize tracing
ComposoTracer.init(instruments=Instruments.OPENAI)
openai_client = OpenAI()
composo_client = Composo()

# Use AgentTracer context manager to capture trace
with AgentTracer(name="research_agent") as tracer:
    response = openai_client.chat.completions.create(
        model="gpt-4",
        messages=[{"role": "user", "content": "Research: quantum computing"}]
    )
    result = response.choices[0].message.content

    # Get the trace object
    trace = tracer.trace

# Evaluate the captured trace
evaluation = composo_client.evaluate_trace(
    trace=trace,
    criteria="Reward thorough research and accurate information",
    tags={"environment": "production", "agent_version": "1.0.0"}
)

print(f"Overall Score: {evaluation.overall_score}")
print(f"Explanation: {evaluation.explanation}")
