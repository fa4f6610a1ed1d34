"""Basic evaluation: score one conversation against one criterion."""

from composo import Composo

client = Composo()

messages = [
    {"role": "user", "content": "What's the capital of France?"},
    {"role": "assistant", "content": "The capital of France is Paris."},
]

result = client.evaluate(
    messages=messages,
    criteria="Reward accurate and informative responses",
    tags={"environment": "production", "version": "1.0.0"},
)

print(f"Score: {result.score}")
# Output: Score: 0.95

print(f"Explanation: {result.explanation}")
# Output: Explanation: The response correctly identifies Paris as the capital of France...
