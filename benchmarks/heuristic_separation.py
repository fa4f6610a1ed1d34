"""How far the heuristic judge's scores separate the bundled dataset's good answers from its
flawed ones (by each line's ``tags.expected``), for the README's criteria. Prints the mean score
of each group per criterion and overall, and the share of (good, flawed) pairs ordered rightly.

    python benchmarks/heuristic_separation.py
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

from composo import Composo, criteria
from composo.server import LocalServer

DATA = Path(__file__).resolve().parent.parent / "examples" / "data" / "conversations.jsonl"
CRITERIA = [
    criteria.rag_faithfulness,
    criteria.tool_selection,
    "Reward answers that resolve the customer's problem",
]


def main() -> int:
    lines = [line for line in DATA.read_text().splitlines() if line.strip()]
    items = [json.loads(line) for line in lines]
    expected = [item["tags"]["expected"] for item in items]
    scores: dict[str, dict[str, list[float]]] = {c: {"good": [], "flawed": []} for c in CRITERIA}
    with (
        LocalServer(judge="heuristic") as srv,
        Composo(api_key=srv.api_key, base_url=srv.base_url) as client,
    ):
        for result in client.evaluate_many_iter(items, CRITERIA, progress=False):
            if result.response is not None and result.response.score is not None:
                scores[result.criterion][expected[result.index]].append(result.response.score)
    good_all: list[float] = []
    flawed_all: list[float] = []
    for criterion, groups in scores.items():
        good, flawed = groups["good"], groups["flawed"]
        good_all += good
        flawed_all += flawed
        print(
            f"{criterion[:60]:60}  good {statistics.fmean(good):.3f} (n={len(good)})  "
            f"flawed {statistics.fmean(flawed):.3f} (n={len(flawed)})"
        )
    ordered = sum((g > f) + 0.5 * (g == f) for g in good_all for f in flawed_all)
    print(
        f"overall: good {statistics.fmean(good_all):.3f}  flawed {statistics.fmean(flawed_all):.3f}"
        f"  pairs ordered rightly {ordered / (len(good_all) * len(flawed_all)):.2f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
