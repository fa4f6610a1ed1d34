"""Submit an evaluation without waiting for it: the server answers with a task id at once, and
the result is fetched later (here straight away, with client.wait)."""

from composo import Composo

client = Composo()

# Submit the evaluation: the call returns as soon as the server has the task
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

# ...do other work, then collect the result (client.get_task(task_id) checks without waiting)
result = client.wait(task_id, timeout=120)
print(f"Score: {result.score}")
print(f"Explanation: {result.explanation}")
