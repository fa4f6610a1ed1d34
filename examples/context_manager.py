"""The client as a context manager: its connections are closed when the block ends."""

from composo import Composo

with Composo() as client:
    result = client.evaluate(
        messages=[
            {"role": "user", "content": "Give me one tip for better sleep."},
            {
                "role": "assistant",
                "content": "Keep a regular schedule: go to bed and wake up at the same time daily.",
            },
        ],
        criteria="Reward actionable advice",
    )
    print(result.score)
# Client automatically closed
