"""Credentials never reach a log line: key-like query parameters and configured keys become
``***`` in every record the server's loggers write (a refused request is still logged)."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from urllib.parse import parse_qsl, unquote_plus

REDACTED = "***"
# Parameter names, lower-cased with everything but letters and digits removed.
_NAMES = frozenset(
    {"key", "apikey", "xapikey", "auth", "authorization", "bearer", "credential", "credentials"}
)
_SUFFIXES = ("apikey", "token", "secret", "password", "passwd")
# Names that end like a credential but are the platform's pagination cursors (GET /api/v1/traces).
_CURSORS = frozenset({"pagetoken", "nextpagetoken"})
_PARAM = re.compile(r"(?<=[?&;])([^=&;#\s\"']+)=([^&;#\s\"']*)")
_NOT_ALNUM = re.compile(r"[^a-z0-9]")
_LOGGERS = ("uvicorn.access", "uvicorn.error", "composo.server")


def _is_credential(name: str) -> bool:
    plain = _NOT_ALNUM.sub("", unquote_plus(name).lower())
    return plain in _NAMES or (plain.endswith(_SUFFIXES) and plain not in _CURSORS)


def credential_parameter(query: bytes, secrets: Iterable[bytes] = ()) -> str | None:
    """The first parameter of ``query`` named like a credential or valued one of ``secrets``."""
    if not query:
        return None
    text = query.decode("latin-1")
    values = {s.decode("latin-1") for s in secrets}
    for name, value in parse_qsl(text, keep_blank_values=True):
        if _is_credential(name) or value in values:
            return name[:64]
    return None


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with credential-like parameter values and ``secrets`` as ``***``."""
    if "=" in text:
        text = _PARAM.sub(
            lambda m: f"{m.group(1)}={REDACTED}" if _is_credential(m.group(1)) else m.group(0),
            text,
        )
    for secret in secrets:
        if secret and secret in text:
            text = text.replace(secret, REDACTED)
    return text


_SECRETS: set[str] = set()


def _clean(value: object) -> object:
    return redact(value, _SECRETS) if isinstance(value, str) else value


def _redacting(record: logging.LogRecord) -> bool:
    """Rewrites message and string arguments, keeping the shape uvicorn's formatter unpacks."""
    record.msg = _clean(record.msg)
    if isinstance(record.args, tuple):
        record.args = tuple(map(_clean, record.args))
    elif isinstance(record.args, dict):
        record.args = {k: _clean(v) for k, v in record.args.items()}
    return True


def install_log_redaction(secrets: Iterable[str] = ()) -> None:
    """Redact on the server's loggers from now on, ``secrets`` included (a filter is added once)."""
    _SECRETS.update(s for s in secrets if s)
    for name in _LOGGERS:
        logging.getLogger(name).addFilter(_redacting)
