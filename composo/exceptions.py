"""The error names of the platform's own SDK (``composo.exceptions``), so code written for it
imports them unchanged. Each name is the class :mod:`composo.errors` defines (import from there
in new code); ``TimeoutError`` here is :class:`~composo.errors.RequestTimeoutError`, the 408
answer, and shadows Python's built-in only for code that imports it from this module.
"""

from __future__ import annotations

from composo.errors import (
    APIError,
    AuthenticationError,
    BadRequestError,
    ComposoError,
    MalformedError,
    RateLimitError,
    RequestTimeoutError,
    get_exception_for_status_code,
)

TimeoutError = RequestTimeoutError  # the platform SDK's name for the 408 error

__all__ = [
    "APIError",
    "AuthenticationError",
    "BadRequestError",
    "ComposoError",
    "MalformedError",
    "RateLimitError",
    "TimeoutError",
    "get_exception_for_status_code",
]
