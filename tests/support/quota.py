"""A transport that hides the quota a server declares, as a server that declares none is seen."""

from __future__ import annotations

import httpx

__all__ = ["NoQuotaHeaders"]


class NoQuotaHeaders(httpx.HTTPTransport):
    """Answers without their ``X-RateLimit-*`` headers: a client behind it learns the limit from
    429 answers alone."""

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = super().handle_request(request)
        for name in ("x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-reset"):
            response.headers.pop(name, None)
        return response
