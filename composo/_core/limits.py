"""Every limit and default the SDK applies, in one place (the platform's where it has one).

Client, batch, CLI and the local server's OpenAI judge read these names; nothing else writes
the numbers down.
"""

from __future__ import annotations

__all__ = [
    "BACKOFF_BASE",
    "BACKOFF_MAX",
    "DEFAULT_MAX_CONCURRENT_REQUESTS",
    "DEFAULT_NUM_RETRIES",
    "DEFAULT_TIMEOUT",
    "MAX_CRITERION_LENGTH",
    "MAX_ERROR_MESSAGE",
    "MAX_EVALUATOR_NAME_LENGTH",
    "MAX_RETRY_AFTER",
    "MIN_MESSAGES",
    "RETRYABLE_STATUS",
    "TAG_LIMIT",
]

# -- the platform's request contract ------------------------------------------------------------
MAX_CRITERION_LENGTH = 4096
"""Characters in one criterion."""
MAX_EVALUATOR_NAME_LENGTH = 255
"""Characters in a saved evaluator's name."""
TAG_LIMIT = 64
"""Characters in a tag's key and in its value."""
MIN_MESSAGES = 2
"""A reward request needs at least the question and the answer."""

# -- retries ------------------------------------------------------------------------------------
RETRYABLE_STATUS = frozenset({408, 409, 429})
"""Statuses worth a second try besides every 5xx."""
MAX_RETRY_AFTER = 30.0
"""Seconds: a longer ``Retry-After`` is waited only this long (and never past the timeout)."""
BACKOFF_BASE = 0.5
"""Seconds: the first backoff's ceiling, doubled for each attempt (full jitter)."""
BACKOFF_MAX = 8.0
"""Seconds: the largest backoff ceiling."""

# -- client defaults ----------------------------------------------------------------------------
DEFAULT_TIMEOUT = 60.0
"""Seconds one call may take, retries and waits included."""
DEFAULT_NUM_RETRIES = 1
"""Retries after the first attempt."""
DEFAULT_MAX_CONCURRENT_REQUESTS = 5
"""Requests in flight per client; the platform advises about 5."""

# -- messages -----------------------------------------------------------------------------------
MAX_ERROR_MESSAGE = 500
"""Characters of a server's error body shown in an exception's message (the whole body is
kept on the exception)."""
