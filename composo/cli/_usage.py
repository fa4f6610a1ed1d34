"""``composo usage``: this month's usage of the API key and its rate limit, in a small table."""

from __future__ import annotations

import argparse

from composo.cli._common import add_connection_arguments, from_platform

add_arguments = add_connection_arguments


def _table(rows: list[tuple[str, str]]) -> str:
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k.ljust(width)}  {v}" for k, v in rows)


def run(args: argparse.Namespace) -> int:
    answer = from_platform(args, lambda client: (client.usage(), client.rate_limits()))
    if isinstance(answer, int):
        return answer
    usage, limits = answer
    counts = usage.usage
    quota = counts.monthly_token_quota
    rows = [
        ("requests this month", f"{counts.total_current_request_count:,}"),
        ("tokens this month", f"{counts.total_current_token_count:,}"),
        ("monthly token quota", "none" if quota is None else f"{quota:,}"),
        ("quota resets", usage.quota_reset_date or "unknown"),
        (
            "rate limit",
            "not declared"
            if limits is None
            else f"{limits.requests_per_minute:g}/min ({limits.remaining:.0f} left now)",
        ),
    ]
    for model, detail in sorted(counts.models.items()):
        requests = detail.get("request_count") if isinstance(detail, dict) else None
        rows.append((f"  {model}", "?" if requests is None else f"{requests:,} requests"))
    print(_table(rows))
    return 0
