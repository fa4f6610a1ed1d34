"""Score a table on a Ray cluster, all workers together within one request budget.

Run against the local server (``composo serve``) or the platform, with COMPOSO_API_KEY and
COMPOSO_BASE_URL set; needs the ray extra
(from a checkout: ``pip install -e '.[ray]'``). On a real cluster, ``ray.init()``
connects to it instead of starting a local one.
"""

from _install import needs

with needs(__doc__):  # without them: one line saying what to install, exit 2
    import pandas as pd
    import ray

    from composo.ray import ComposoBatch, RequestBudget

ray.init(num_cpus=2)  # a local Ray; on a cluster, ray.init() connects to it

tickets = pd.DataFrame(
    {
        "ticket": [f"t{i}" for i in range(40)],
        "prompt": [f"Order {i}: how do refunds work for returned boots?" for i in range(40)],
        "reply": ["Unused items returned within 30 days get a full refund."] * 40,
    }
)

# One actor hands out permits: at most 5 requests in flight and 1,200 a minute, cluster-wide.
budget = RequestBudget(max_concurrent_requests=5, requests_per_minute=1200)

scored = (
    ray.data.from_pandas(tickets)  # or ray.data.read_parquet("s3://...")
    .repartition(4)
    .map_batches(
        ComposoBatch,
        fn_constructor_kwargs={
            "criteria": {
                "refund": "Reward answers that explain the refund policy",
                "window": "Passes if the answer mentions the return window",
            },
            "columns": {"id": "ticket", "question": "prompt", "answer": "reply"},
            "budget": budget,
        },
        compute=ray.data.ActorPoolStrategy(size=2),  # two workers, each with its own client
        num_cpus=0.5,
        batch_size=10,
        batch_format="pandas",
    )
)

result = scored.to_pandas().sort_values("ticket")  # or scored.write_parquet(...)
print(result[["ticket", "refund_score", "window_score", "error"]].head())
print(f"mean refund score: {result['refund_score'].mean():.2f}")
