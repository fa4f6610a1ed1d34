"""Every limit and default the SDK applies, in one place (the platform's where it has one).

Client, batch, CLI and the local server's OpenAI judge read these names; nothing else writes
the numbers down.
"""

from __future__ import annotations

__all__ = [
    "BACKOFF_BASE",
    "BACKOFF_MAX",
    "CACHE_EVICT_TO",
    "CACHE_MAX_AGE",
    "CACHE_MAX_BYTES",
    "CACHE_ROW_OVERHEAD",
    "DEFAULT_MAX_CONCURRENT_REQUESTS",
    "DEFAULT_NUM_RETRIES",
    "DEFAULT_TIMEOUT",
    "MAX_CRITERION_LENGTH",
    "MAX_ERROR_MESSAGE",
    "MAX_EVALUATOR_NAME_LENGTH",
    "MAX_RESPONSE_BYTES",
    "MAX_RETRY_AFTER",
    "MAX_TASK_ID_LENGTH",
    "MAX_THROTTLE_WAITS",
    "MIN_MESSAGES",
    "RATE_DECREASE",
    "RATE_GROWTH",
    "RATE_MEASURE_WINDOW",
    "RATE_REGAIN",
    "RETRYABLE_STATUS",
    "TAG_LIMIT",
    "THROTTLE_FORGET",
    "THROTTLE_JITTER",
    "THROTTLE_RELEASE",
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
"""Seconds: the longest ``Retry-After`` the local server's OpenAI judge waits. The clients wait
any ``Retry-After`` their call's timeout leaves room for, and refuse a longer one at once."""
BACKOFF_BASE = 0.5
"""Seconds: the first backoff's ceiling, doubled for each attempt (full jitter)."""
BACKOFF_MAX = 8.0
"""Seconds: the largest backoff ceiling."""

# -- throttling (429): a budget of its own, separate from ``num_retries`` ------------------------
MAX_THROTTLE_WAITS = 25
"""Waits for a 429 one batch request (``evaluate_many``, background evaluation) may make before
its ``RateLimitError`` is recorded; each wait is also bounded by the call's timeout."""
RATE_DECREASE = 0.85
"""On a 429 with a ``Retry-After`` the client's shared request rate drops to this share of what
the server just allowed (once per throttling episode, however many requests were refused in
it)."""
RATE_GROWTH = 0.05
"""Requests a second added to the shared rate per success once it is back at the rate the
server was last seen allowing (probing above it slowly)."""
RATE_REGAIN = 1.5
"""Below that rate (after an episode's decrease, or from the release window's pace when nothing
was measured), each success multiplies the rate by this: it is regained within a few requests."""
RATE_MEASURE_WINDOW = 5.0
"""Seconds of recent successes the rate the server allows is measured over."""
THROTTLE_JITTER = 0.1
"""A ``Retry-After`` wait is stretched by up to this share, at random, so that clients told the
same instant do not all come back at once (requests of one client are spaced by its rate)."""
THROTTLE_RELEASE = 0.5
"""Seconds over which the requests that waited out a hold leave (at most half the hold): one
client's requests come back spread out, not all at the same instant."""
THROTTLE_FORGET = 60.0
"""Seconds without a 429 after which a client stops pacing (unless ``requests_per_minute`` is
set)."""

# -- responses ----------------------------------------------------------------------------------
MAX_RESPONSE_BYTES = 8 * 1024 * 1024
"""Bytes of a response body, after decompression (8 MiB: a verdict is a few KiB, a trace
verdict with thousands of agent instances a few MiB). A larger body is refused with
``ResponseTooLargeError`` without being held in memory."""
MAX_TASK_ID_LENGTH = 256
"""Characters in a background task's id."""

# -- client defaults ----------------------------------------------------------------------------
DEFAULT_TIMEOUT = 60.0
"""Seconds one call may take, retries and waits included."""
DEFAULT_NUM_RETRIES = 1
"""Retries after the first attempt."""
DEFAULT_MAX_CONCURRENT_REQUESTS = 5
"""Requests in flight per client; the platform advises about 5."""

# -- the result cache (composo._cache) ------------------------------------------------------------
CACHE_MAX_BYTES = 1024**3
"""Bytes of answers the result cache keeps (1 GiB: some 300,000 answers of a few KiB); a write
that takes it past this removes the oldest answers first. ``COMPOSO_CACHE_MAX_SIZE`` or
``ResultCache(max_bytes=...)`` changes it."""
CACHE_MAX_AGE = 30 * 24 * 3600.0
"""Seconds an answer is kept (30 days); an older one is never served, and is removed.
``COMPOSO_CACHE_MAX_AGE`` or ``ResultCache(max_age=...)`` changes it."""
CACHE_EVICT_TO = 0.99
"""Share of ``max_bytes`` a write that went past it brings the cache down to: removing happens
once per hundredth of the cap written, not on every write, and each time takes a few
milliseconds per MiB removed (one statement; the writes between pay nothing for it)."""
CACHE_ROW_OVERHEAD = 100
"""Bytes counted for each answer besides its key, body and headers: SQLite's own bookkeeping
(the row, its key in the primary index, its time in the age index)."""

# -- messages -----------------------------------------------------------------------------------
MAX_ERROR_MESSAGE = 500
"""Characters of a server's error body shown in an exception's message (the whole body is
kept on the exception)."""

# -- traces read from spans -----------------------------------------------------------------------
MAX_SPANS_PER_TRACE = 10_000
"""Spans one trace id may have before it is reported as too large (its spans are not kept)."""
CONTEXT_LIMIT = 4000
"""Characters of a context span's input or output kept in the trace."""
