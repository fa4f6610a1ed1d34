"""Capture an agent's OpenAI calls as a trace and evaluate it.

Needs the tracing extra (from a checkout: pip install -e '.[tracing]') and the OpenAI
variables checked by _openai_key.py.
"""

from _openai_key import require_openai_key

require_openai_key()  # without OPENAI_API_KEY: one line saying what to set, exit 2


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
