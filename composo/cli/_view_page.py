"""The item table's page: its script and style (package data, plain files with no build step)
and the HTML around the page's data, either linked (``composo view`` serves them) or inlined with
a content security policy that lets only that script run (``composo report --items``)."""

from __future__ import annotations

import base64
import hashlib
import html
from functools import cache
from importlib import resources
from typing import Any

from composo.cli._view_data import script_json

__all__ = ["VIEW_CSP", "asset", "data_element", "inline_assets", "view_page"]

# What the viewer lets its page do: its own script and style, fetches to itself, nothing else.
VIEW_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)


@cache
def asset(name: str) -> str:
    """``view.js`` or ``view.css``, as shipped in the package."""
    return (resources.files("composo.cli") / "_view_static" / name).read_text(encoding="utf-8")


def data_element(data: Any) -> str:
    return f'<script type="application/json" id="composo-data">{script_json(data)}</script>'


def view_page(data: Any) -> str:
    """The viewer's page: the data inline, the script and style linked from the viewer."""
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        f"<title>{html.escape(str(data.get('title', '')))}</title>"
        '<link rel="stylesheet" href="static/view.css"></head><body>'
        f'<main id="composo-app"></main>{data_element(data)}'
        '<script src="static/view.js"></script></body></html>\n'
    )


def inline_assets() -> tuple[str, str, str]:
    """The style and script to inline, and the policy (as a meta element's content) that lets
    exactly that script run and nothing be fetched."""
    script = asset("view.js")
    digest = base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode()
    policy = (
        f"default-src 'none'; script-src 'sha256-{digest}'; style-src 'unsafe-inline'; "
        "img-src data:; base-uri 'none'; form-action 'none'"
    )
    return asset("view.css"), script, policy
