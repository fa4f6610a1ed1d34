"""Requests on the sync client's own connections, past the ``httpx.Client`` layers it never uses.

``httpx.Client.send`` runs every request through an auth flow, a redirect loop, event hooks and
two trips through a cookie jar (the standard library's, which builds ``urllib`` request objects
each time); for an API call from a client with no auth, hooks, cookies or redirects to follow
that is about a third of httpx's CPU per request. The client's own connections skip those layers
and keep the rest: the same request object, headers, transport stack and exceptions, and the
``httpx`` logger's line per request. A supplied ``http_client`` always goes through ``send``, so
its hooks, auth and cookies apply.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import httpx

__all__ = ["DirectSender"]

_log = logging.getLogger("httpx")
_KEPT_URLS = 64  # task URLs differ per task: the cache stays small


class DirectSender:
    """Builds and sends the requests of one own ``httpx.Client`` through its transport."""

    __slots__ = ("client", "headers", "transport", "urls")

    def __init__(self, client: httpx.Client, transport: httpx.BaseTransport) -> None:
        self.client = client
        self.transport = transport
        self.headers = client.headers.copy()  # the client's defaults, normalized once
        self.urls: dict[str, httpx.URL] = {}  # parsed once: a client calls a few endpoints

    def build(
        self,
        method: str,
        url: str,
        json: Any,
        extra: Mapping[str, str] | httpx.Headers | None,
        timeout: dict[str, float],
    ) -> httpx.Request:
        """The request ``client.build_request`` would make, with ``timeout`` as its extension."""
        headers = self.headers
        if extra is not None:
            headers = headers.copy()
            headers.update(extra)
        parsed = self.urls.get(url)
        if parsed is None:
            if len(self.urls) >= _KEPT_URLS:
                self.urls.clear()
            parsed = self.urls[url] = httpx.URL(url)
        return httpx.Request(
            method, parsed, json=json, headers=headers, extensions={"timeout": timeout}
        )

    def send(self, request: httpx.Request) -> httpx.Response:
        """The answer's head, its body still to read (as ``client.send(..., stream=True)``)."""
        if self.client.is_closed:
            raise RuntimeError("Cannot send a request, as the client has been closed.")
        response = self.transport.handle_request(request)
        response.request = request
        if _log.isEnabledFor(logging.INFO):
            _log.info(
                'HTTP Request: %s %s "%s %d %s"',
                request.method,
                request.url,
                response.http_version,
                response.status_code,
                response.reason_phrase,
            )
        return response
