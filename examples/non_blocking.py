"""Submit an evaluation without waiting for it: the server answers with a task id."""

from composo import Composo

client = Composo()

# Submit evaluation without waiting
response = client.evaluate(
    messages=[
        {"role": "user", "content": "Summarise the plot of Hamlet in one sentence."},
        {"role": "assistant", "content": "Hamlet avenges his father's murder; nearly all die."},
    ],
    criteria="Reward concise summaries that keep the essential plot",
    block=False,
)

task_id = response["task_id"]
print(f"Task submitted with ID: {task_id}")
# Use task_id to check status later
