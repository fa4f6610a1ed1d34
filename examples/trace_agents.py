"""Two agents, traced and evaluated: an orchestrator plans and writes the answer, and calls a
researcher that looks facts up with a tool.

Needs the tracing extra (from a checkout: pip install -e '.[tracing]') and the OpenAI
variables checked by _openai_key.py.
"""

from _openai_key import require_openai_key

require_openai_key()  # without OPENAI_API_KEY: one line saying what to set, exit 2


import json

from openai import OpenAI

from composo import AgentTracer, Composo, ComposoTracer, Instruments, agent_tracer

ComposoTracer.init(instruments=Instruments.OPENAI)
client = OpenAI()
MODEL = "gpt-4o-mini"

FACTS = {
    "mars": "Mars has two small moons, Phobos and Deimos.",
    "jupiter": "Jupiter has 95 officially recognised moons.",
}

LOOKUP_TOOL = {
    "type": "function",
    "function": {
        "name": "lookup_fact",
        "description": "Look up a verified fact about a planet",
        "parameters": {
            "type": "object",
            "properties": {"topic": {"type": "string", "description": "a planet, e.g. mars"}},
            "required": ["topic"],
        },
    },
}


def lookup_fact(topic: str) -> str:
    return FACTS.get(topic.strip().lower(), "No fact found.")


@agent_tracer(name="researcher")
def researcher(question: str) -> str:
    """Answer one question, using lookup_fact until the model stops calling it."""
    messages = [
        {"role": "system", "content": "Use lookup_fact, then answer briefly."},
        {"role": "user", "content": question},
    ]
    for _ in range(5):
        reply = (
            client.chat.completions.create(model=MODEL, messages=messages, tools=[LOOKUP_TOOL])
            .choices[0]
            .message
        )
        if not reply.tool_calls:
            return reply.content or ""
        messages.append(reply)
        for call in reply.tool_calls:
            found = lookup_fact(**json.loads(call.function.arguments))
            messages.append({"role": "tool", "tool_call_id": call.id, "content": found})
    return "The researcher found no answer."


def orchestrator(task: str) -> tuple[str, AgentTracer]:
    with AgentTracer(name="orchestrator") as tracer:
        question = (
            client.chat.completions.create(
                model=MODEL,
                messages=[
                    {"role": "system", "content": "Turn the task into one research question."},
                    {"role": "user", "content": task},
                ],
            )
            .choices[0]
            .message.content
        )
        finding = researcher(question or task)
        answer = (
            client.chat.completions.create(
                model=MODEL,
                messages=[
                    {"role": "system", "content": "Answer the task from the research notes."},
                    {"role": "user", "content": f"Task: {task}\nResearch notes: {finding}"},
                ],
            )
            .choices[0]
            .message.content
        )
    return answer or "", tracer


answer, tracer = orchestrator("How many moons does Mars have?")
trace = tracer.trace
print(f"Answer: {answer}")

with Composo() as composo_client:
    evaluation = composo_client.evaluate_trace(
        trace=trace,
        criteria="Reward agents whose final answer is grounded in the researcher's tool results",
    )

print(f"Overall Score: {evaluation.overall_score}")
for agent_id, score in evaluation.agent_scores.items():
    print(f"{trace.agent_instance_by_id[agent_id].name}: {score}")
