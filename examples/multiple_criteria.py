"""Several criteria at once: one result per criterion, in the order given."""

from composo import Composo

client = Composo()

results = client.evaluate(
    messages=[
        {"role": "user", "content": "How does a refrigerator keep food cold?"},
        {"role": "assistant", "content": "Refrigerant soaks up heat inside and dumps it outside."},
    ],
    criteria=[
        "Reward accurate information",
        "Reward clear communication",
        "Penalize overly technical jargon",
    ],
)

for result in results:
    print(f"Score: {result.score} - {result.explanation}")
