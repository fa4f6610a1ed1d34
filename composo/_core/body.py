"""Response bodies decompressed in bounded steps and refused past ``MAX_RESPONSE_BYTES``: httpx
inflates each network chunk whole (64 KiB of gzip can become 64 MiB at once), so a compressed
bomb would be in memory before any check."""

from __future__ import annotations

import zlib

from composo._core.limits import MAX_RESPONSE_BYTES
from composo.errors import ResponseTooLargeError, UnexpectedResponseError

ACCEPT_ENCODING = "gzip, deflate"
"""What the clients accept: the encodings :class:`Inflater` decodes with a bound."""
_WBITS = {"gzip": 16 + zlib.MAX_WBITS, "x-gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}


class Inflater:
    """Collects one body: ``feed`` the raw chunks, then ``result``; raises once the decoded size
    passes ``limit``."""

    __slots__ = ("_limit", "_parts", "_size", "_zlib")

    def __init__(self, content_encoding: str | None, limit: int = MAX_RESPONSE_BYTES) -> None:
        self._limit = limit
        self._parts: list[bytes] = []
        self._size = 0
        encoding = (content_encoding or "").strip().lower()
        wbits = _WBITS.get(encoding)
        self._zlib = None if wbits is None else zlib.decompressobj(wbits)
        if wbits is None and encoding not in ("", "identity"):
            raise UnexpectedResponseError(
                f"response: Content-Encoding {content_encoding!r} was not asked for (the client "
                f"accepts {ACCEPT_ENCODING}); check a proxy between the client and the server"
            )

    def check_length(self, content_length: str | None) -> None:
        """Refuse at once a plain body whose announced length is over the limit."""
        if (
            self._zlib is None
            and content_length
            and content_length.isdigit()
            and int(content_length) > self._limit
        ):
            self._too_large()

    def feed(self, data: bytes) -> None:
        if self._zlib is None:
            self._add(data)
            return
        try:
            while data:
                # At most one byte past what is left: enough to know the limit was passed.
                self._add(self._zlib.decompress(data, self._limit - self._size + 1))
                data = self._zlib.unconsumed_tail
        except zlib.error as exc:
            raise UnexpectedResponseError(
                f"response: body could not be decompressed: {exc}"
            ) from None

    def result(self) -> bytes:
        if self._zlib is not None:
            try:
                self._add(self._zlib.flush())
            except zlib.error as exc:  # pragma: no cover (flush after a good stream)
                raise UnexpectedResponseError(
                    f"response: body could not be decompressed: {exc}"
                ) from None
        return self._parts[0] if len(self._parts) == 1 else b"".join(self._parts)

    def _add(self, out: bytes) -> None:
        if out:
            self._size += len(out)
            if self._size > self._limit:
                self._parts.clear()
                self._too_large()
            self._parts.append(out)

    def _too_large(self) -> None:
        raise ResponseTooLargeError(
            f"response: body is over the client's limit of {self._limit} bytes (decompressed); "
            "a Composo verdict is a few KiB, so this is not an answer from the API (check "
            "base_url and any proxy in between)"
        )
