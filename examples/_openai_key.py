"""The check the examples that call OpenAI start with (evaluate_trace.py, trace_agents.py,
responses_builtin_tools.py, responses_mcp.py).

They need OPENAI_API_KEY besides the Composo variables (COMPOSO_API_KEY, or COMPOSO_BASE_URL for
a local server). Any OpenAI-compatible endpoint works: set OPENAI_BASE_URL to it as well.
"""

import os
import sys


def require_openai_key() -> None:
    """Without OPENAI_API_KEY, say in one line what to set and exit 2."""
    if not os.environ.get("OPENAI_API_KEY"):
        print(
            "this example calls OpenAI: set OPENAI_API_KEY (and OPENAI_BASE_URL for an "
            "OpenAI-compatible endpoint), plus COMPOSO_API_KEY or COMPOSO_BASE_URL",
            file=sys.stderr,
        )
        sys.exit(2)
