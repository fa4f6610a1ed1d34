"""Exceptions raised by the SDK: one class per status family, each carrying what the server said."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from composo._core.limits import MAX_ERROR_MESSAGE

if TYPE_CHECKING:
    from pydantic import ValidationError

__all__ = [
    "APIConnectionError",
    "APIError",
    "APIStatusError",
    "APITimeoutError",
    "AuthenticationError",
    "BadRequestError",
    "ComposoError",
    "ComposoValidationError",
    "MalformedError",
    "NotFoundError",
    "PermissionDeniedError",
    "RateLimitError",
    "RequestTimeoutError",
    "RequestTooLargeError",
    "ResponseTooLargeError",
    "TaskFailedError",
    "UnexpectedResponseError",
    "UnknownArgumentError",
    "get_exception_for_status_code",
    "status_error",
    "validation_error",
]


class ComposoError(Exception):
    """Base of every error the SDK raises; catch this to catch them all.

    ``message``, ``status_code`` and ``response_body`` may be given by position, in the order
    the platform's own SDK takes them (code that builds these errors, e.g. in tests, keeps
    working); ``request_id`` is keyword-only.
    """

    def __init__(
        self,
        message: str,
        status_code: int | None = None,
        response_body: Any = None,
        *,
        request_id: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status_code = status_code
        self.response_body = response_body
        self.request_id = request_id

    def __str__(self) -> str:
        parts = [self.message]
        if self.status_code is not None:
            parts.append(f"(status {self.status_code})")
        if self.request_id:
            parts.append(f"[request id {self.request_id}]")
        return " ".join(parts)


class ComposoValidationError(ComposoError, ValueError):
    """Input refused on the client, before any network call. Also a ``ValueError``."""


class UnknownArgumentError(ComposoValidationError, TypeError):
    """A keyword the method does not take (``criterion=`` for ``criteria=``), refused before any
    request with the arguments it takes. Also a ``TypeError``, as Python's own refusal is."""


class APIConnectionError(ComposoError):
    """The server could not be reached or dropped the connection."""


class APITimeoutError(APIConnectionError):
    """The call's ``timeout`` ran out (retries and waits included)."""


class APIStatusError(ComposoError):
    """The server answered with an error status; ``retry_after`` is its advised wait, if any."""

    retry_after: float | None = None


class BadRequestError(APIStatusError):
    """400: the platform refused the request."""


class AuthenticationError(APIStatusError):
    """401: the API key is missing or wrong."""


class PermissionDeniedError(APIStatusError):
    """403: the key may not do this."""


class NotFoundError(APIStatusError):
    """404: no such resource (an unknown task id, a wrong base URL)."""


class RequestTimeoutError(APIStatusError):
    """408: the server gave up waiting for the request; retried automatically. (The call's own
    ``timeout`` running out is :class:`APITimeoutError`.)"""


class RequestTooLargeError(APIStatusError):
    """413: the request body is over the server's limit."""


class MalformedError(APIStatusError):
    """422: the body did not match the platform's contract."""


class RateLimitError(APIStatusError):
    """429: too many requests; ``retry_after`` holds the server's advice in seconds, if any."""


class APIError(APIStatusError):
    """5xx (and 524): the server failed; retried automatically."""


class UnexpectedResponseError(ComposoError):
    """The server answered success with a body that is not the expected response (not JSON, or
    without the fields of its response model); ``response_body`` holds what it sent."""


class ResponseTooLargeError(UnexpectedResponseError):
    """The response body was over ``composo._core.limits.MAX_RESPONSE_BYTES`` once
    decompressed; it was dropped as it arrived, never held whole."""


class TaskFailedError(ComposoError):
    """A background evaluation task ended in failure."""


_BY_STATUS: dict[int, type[APIStatusError]] = {
    400: BadRequestError,
    401: AuthenticationError,
    403: PermissionDeniedError,
    404: NotFoundError,
    408: RequestTimeoutError,
    413: RequestTooLargeError,
    422: MalformedError,
    429: RateLimitError,
}


def _status_class(status_code: int) -> type[APIStatusError]:
    """The class for ``status_code``: its own, else :class:`APIError` for 5xx, else the base."""
    return _BY_STATUS.get(status_code) or (APIError if status_code >= 500 else APIStatusError)


def status_error(status_code: int, body: Any, request_id: str | None = None) -> APIStatusError:
    """Build the exception that matches ``status_code``, with the server's ``detail`` as message."""
    cls = _status_class(status_code)
    detail = body.get("detail") if isinstance(body, dict) else body
    message = _detail_text(detail) if detail else f"HTTP {status_code}"
    if len(message) > MAX_ERROR_MESSAGE:  # e.g. a proxy's HTML error page
        message = (
            message[:MAX_ERROR_MESSAGE] + "... (truncated; the whole body is in .response_body)"
        )
    return cls(message, status_code=status_code, response_body=body, request_id=request_id)


def get_exception_for_status_code(
    status_code: int, message: str = "", response_body: Any = None
) -> APIStatusError:
    """The error the SDK raises for ``status_code``, with ``message`` as given (the platform's
    own SDK has this factory; its callers keep working). A status of no family of its own gives
    :class:`APIStatusError`, 5xx :class:`APIError`."""
    return _status_class(status_code)(message, status_code, response_body)


def _detail_text(detail: Any) -> str:
    """Flatten FastAPI-style validation details into one readable line."""
    if isinstance(detail, list):
        items = []
        for d in detail:
            if isinstance(d, dict) and "msg" in d:
                loc = ".".join(str(x) for x in d.get("loc", ()) if x != "body")
                items.append(f"{loc}: {d['msg']}" if loc else str(d["msg"]))
            else:
                items.append(str(d))
        return "; ".join(items)
    return str(detail)


def validation_error(
    exc: ValidationError, field: str = "", rename: Mapping[str, str] | None = None
) -> ComposoValidationError:
    """Pydantic's error, reworded as one ``field: problem`` clause per field; ``rename`` maps a
    wire field to the name the caller used (``evaluation_criteria`` -> ``criteria[1]``)."""
    lines = []
    for err in exc.errors(include_url=False):
        parts = [str(p) for p in (field, *err["loc"]) if p != ""]
        msg = str(err["msg"]).removeprefix("Value error, ")
        if parts and msg.startswith(parts[-1] + "["):  # the rule named the entry itself
            parts.pop()
        elif parts:
            msg = msg.removeprefix(parts[-1] + ": ")  # the rule named the field already
        if parts and rename and parts[0] in rename:
            parts[0] = rename[parts[0]]
        loc = ".".join(parts)
        lines.append(f"{loc}: {msg}" if loc else msg)
    return ComposoValidationError("; ".join(lines))
