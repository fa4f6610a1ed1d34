"""Several criteria at once: one result per criterion, in the order given."""

from composo import Composo

client = Composo()

results = client.evaluate(
    messages=[
        {"role": "user", "content": "How does a refrigerator keep food cold?"},
        {
            "role": "assistant",
            "content": (
                "A refrigerator pumps heat out of the box: a refrigerant evaporates inside, "
                "absorbing heat, and is compressed and condensed outside, where it releases "
                "that heat through the coils at the back."
            ),
        },
    ],
    criteria=[
        "Reward accurate information",
        "Reward clear communication",
        "Penalize overly technical jargon",
    ],
)

for result in results:
    print(f"Score: {result.score} - {result.explanation}")
