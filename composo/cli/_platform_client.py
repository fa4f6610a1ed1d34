"""What ``composo history`` and ``composo usage`` share: the connection flags and the client."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from composo import Composo

__all__ = ["add_connection_arguments", "connect"]


def add_connection_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--base-url", metavar="URL", help="API base URL (or COMPOSO_BASE_URL)")
    parser.add_argument("--api-key", metavar="KEY", help="API key (or COMPOSO_API_KEY)")
    parser.add_argument(
        "--timeout",
        type=float,
        default=None,
        metavar="SECONDS",
        help="seconds each request may take, retries included",
    )


def connect(args: argparse.Namespace) -> Composo:
    """The client the flags (and the environment) describe.

    Raises:
        ComposoError: no API key, or a bad setting.
    """
    from composo import Composo
    from composo._core.limits import DEFAULT_TIMEOUT

    timeout = DEFAULT_TIMEOUT if args.timeout is None else args.timeout
    return Composo(api_key=args.api_key, base_url=args.base_url, timeout=timeout)
