"""The client's limits and defaults, the platform's where it has one, in one place (the result
cache's and span traces' own limits sit in those modules)."""

from __future__ import annotations

# -- the platform's request contract (characters) -----------------------------------------------
MAX_CRITERION_LENGTH = 4096
MAX_EVALUATOR_NAME_LENGTH = 255  # a saved evaluator's name
TAG_LIMIT = 64  # a tag's key, and its value
MIN_MESSAGES = 2  # a reward request needs at least the question and the answer

# -- retries (seconds) ----------------------------------------------------------------------------
RETRYABLE_STATUS = frozenset({408, 409, 429})  # worth a second try, besides every 5xx
MAX_RETRY_AFTER = 30.0
"""The longest ``Retry-After`` the local server's OpenAI judge waits. The clients wait any their
call's timeout leaves room for, and refuse a longer one at once."""
BACKOFF_BASE = 0.5  # the first backoff's ceiling, doubled each attempt (full jitter)
BACKOFF_MAX = 8.0  # the largest ceiling

# -- throttling (429): a budget of its own, separate from ``num_retries`` ------------------------
MAX_THROTTLE_WAITS = 25
"""Waits for a 429 one batch request may make before its ``RateLimitError`` is recorded (each
also bounded by the call's timeout)."""
RATE_DECREASE = 0.85
"""On a 429 with ``Retry-After``, the shared rate drops to this share of what the server just
allowed (once per throttling episode, however many requests it refused)."""
RATE_GROWTH = 0.05  # requests a second added per success once back at the allowed rate
RATE_REGAIN = 1.5  # below that rate, each success multiplies the rate by this
RATE_MEASURE_WINDOW = 5.0  # seconds of recent successes the allowed rate is measured over
THROTTLE_JITTER = 0.1
"""A ``Retry-After`` wait is stretched by up to this share at random, so clients told the same
instant do not all come back at once."""
THROTTLE_RELEASE = 0.5
"""Seconds over which the requests that waited out a hold leave (at most half the hold)."""
THROTTLE_FORGET = 60.0  # seconds without a 429 before pacing stops (unless requests_per_minute)

# -- responses ----------------------------------------------------------------------------------
MAX_RESPONSE_BYTES = 8 * 1024 * 1024
"""Bytes of a decompressed response body (a verdict is a few KiB, a trace verdict with
thousands of agent instances a few MiB); a larger one is refused without being held."""
MAX_TASK_ID_LENGTH = 256  # characters in a background task's id

# -- client defaults ----------------------------------------------------------------------------
DEFAULT_TIMEOUT = 60.0  # seconds one call may take, retries and waits included
DEFAULT_NUM_RETRIES = 1  # after the first attempt
DEFAULT_MAX_CONCURRENT_REQUESTS = 5  # requests in flight per client; the platform advises 5

# -- messages -----------------------------------------------------------------------------------
MAX_ERROR_MESSAGE = 500  # characters of an error body in the message (all of it on the exception)
