"""Where the clients' own connections go and which certificates they trust, as httpx decides it.

httpx reads ``HTTP(S)_PROXY``, ``ALL_PROXY``, ``NO_PROXY`` (through ``urllib.request.getproxies``)
and ``SSL_CERT_FILE`` / ``SSL_CERT_DIR`` only for a client built without a transport; the
clients build their own (deadline-bound sockets), so :class:`Network` applies the same rules,
read once when it is made. ``trust_env=False`` reads none of it.
"""

from __future__ import annotations

import functools
import ipaddress
import os
import ssl
from typing import Any
from urllib.request import getproxies

import httpx

from composo.errors import ComposoValidationError

ProxyOption = str | httpx.URL | httpx.Proxy | None
VerifyOption = bool | str | os.PathLike[str] | ssl.SSLContext

_ENV_NAMES = {"http": "HTTP_PROXY", "https": "HTTPS_PROXY", "all": "ALL_PROXY"}
_MAX_ROUTES = 64  # hosts whose route is remembered (a client talks to one or two)


def _shown(url: httpx.URL | str) -> str:
    """A proxy URL without its credentials."""
    try:
        parsed = httpx.URL(url)
    except Exception:
        return "<not a URL>"
    port = f":{parsed.port}" if parsed.port is not None else ""
    return f"{parsed.scheme}://{parsed.host}{port}"


def _proxy(value: Any, where: str) -> httpx.Proxy:
    """``value`` as an ``httpx.Proxy`` (a bare ``host:port`` is an http proxy, as httpx reads
    it), or an error naming ``where``."""
    if isinstance(value, httpx.Proxy):
        proxy = value
    elif isinstance(value, (str, httpx.URL)):
        text = str(value).strip()
        text = text if "://" in text else "http://" + text
        try:
            proxy = httpx.Proxy(text)
            usable = bool(proxy.url.host)
        except Exception:
            usable = False
        if not usable:
            raise ComposoValidationError(
                f"{where}: {_shown(text)!r} is not a proxy URL; give the scheme and host, e.g. "
                "http://proxy.example:3128 (http, https or socks5)"
            )
    else:
        raise ComposoValidationError(
            f"{where}: expected a proxy URL (str) or an httpx.Proxy, got {type(value).__name__}"
        )
    if proxy.url.scheme.startswith("socks"):
        import importlib.util

        if importlib.util.find_spec("socksio") is None:
            raise ComposoValidationError(
                f"{where}: {_shown(proxy.url)!r} is a SOCKS proxy, which needs the socksio "
                "package: pip install 'httpx[socks]'"
            )
    return proxy


class _Bypass:
    """One ``NO_PROXY`` entry, matched as httpx does: ``example.com`` and its subdomains,
    ``.example.com`` subdomains only, ``localhost`` or an address exactly, ``http://host`` that
    scheme only, ``host:port`` that port only; ``10.0.0.0/8`` the whole network."""

    __slots__ = ("host", "itself", "network", "port", "scheme", "subdomains")

    def __init__(self, entry: str) -> None:
        entry = entry.strip().lower()
        self.scheme, self.port, host = "", None, entry
        pattern = "://" in entry  # a URL pattern, as httpx's mounts take
        if pattern:
            url = httpx.URL(entry)
            self.scheme = "" if url.scheme == "all" else url.scheme
            host, self.port = url.host, url.port
        elif _address(entry) is None:
            name, _, port = entry.rpartition(":")
            if name and port.isdigit():
                host, self.port = name, int(port)
        host = host.strip("[]")
        self.network = _address(host)
        # a pattern's plain host is that host only, as are an address, localhost and "*"
        exact = self.network is not None or host in ("", "*", "localhost")
        exact = exact or (pattern and not host.startswith("*"))
        self.subdomains = not exact
        self.itself = exact or not host.startswith(("*.", "."))
        if not exact:
            host = host.lstrip("*") if self.itself else host.lstrip("*.")
        self.host = "" if host == "*" else host

    def matches(self, scheme: str, host: str, port: int | None) -> bool:
        if (self.scheme and self.scheme != scheme) or (self.port is not None and self.port != port):
            return False
        if self.network is not None:
            try:
                return ipaddress.ip_address(host) in self.network
            except ValueError:
                return False
        if not self.host or (self.itself and host == self.host):
            return True
        return self.subdomains and host.endswith("." + self.host)


def _address(text: str) -> ipaddress.IPv4Network | ipaddress.IPv6Network | None:
    try:
        return ipaddress.ip_network(text.strip("[]"), strict=False)
    except ValueError:
        return None


class Network:
    """The proxy routes and TLS trust of a client's own connections: ``proxy``, ``verify`` and
    ``trust_env`` as :class:`~composo.Composo` documents them; an unusable setting (or variable
    of the environment) is a ``ComposoValidationError``."""

    def __init__(
        self, proxy: ProxyOption = None, verify: VerifyOption = True, trust_env: bool = True
    ) -> None:
        if not isinstance(trust_env, bool):
            raise ComposoValidationError(
                f"trust_env: must be True or False, got {type(trust_env).__name__}"
            )
        self.proxy, self.verify, self.trust_env = proxy, verify, trust_env
        self._proxies: dict[str, httpx.Proxy] = {}
        self._bypass: list[_Bypass] = []
        self._routes = functools.lru_cache(maxsize=_MAX_ROUTES)(self._route)
        if proxy is not None:
            self._proxies["all"] = _proxy(proxy, "proxy")
        elif trust_env:
            self._read_environment()
        self._ca = self._check_verify(verify)
        self._context: ssl.SSLContext | None = (
            verify if isinstance(verify, ssl.SSLContext) else None
        )

    def _read_environment(self) -> None:
        found = getproxies()
        entries = [e.strip() for e in (found.get("no") or "").split(",") if e.strip()]
        if "*" in entries:
            return  # NO_PROXY=* : no proxy for any host
        for scheme, name in _ENV_NAMES.items():
            if found.get(scheme):
                self._proxies[scheme] = _proxy(found[scheme], f"{name} (from the environment)")
        if self._proxies:
            try:
                self._bypass = [_Bypass(e) for e in entries]
            except (ValueError, httpx.InvalidURL) as exc:
                raise ComposoValidationError(
                    f"NO_PROXY (from the environment): an entry cannot be read ({exc}); give "
                    "host names, addresses or networks separated by commas"
                ) from None

    def _check_verify(self, verify: Any) -> tuple[str, str | None, str | None] | None:
        """``(kind, file, dir)``, kind ``default``, ``env``, ``path`` or ``off``; ``None``: a
        context."""
        if isinstance(verify, bool):
            if not verify:
                return ("off", None, None)
            if not self.trust_env:
                return ("default", None, None)
            cafile = os.environ.get("SSL_CERT_FILE") or None
            capath = None if cafile else os.environ.get("SSL_CERT_DIR") or None
            if cafile and not os.path.isfile(cafile):
                raise ComposoValidationError(
                    f"SSL_CERT_FILE (from the environment): no file at {cafile!r}; point it at "
                    "a CA bundle (PEM), unset it, or pass trust_env=False"
                )
            if cafile or capath:
                return ("env", cafile, capath)
            return ("default", None, None)
        if isinstance(verify, ssl.SSLContext):
            return None
        if isinstance(verify, (str, os.PathLike)):
            path = os.path.expanduser(os.fspath(verify))
            if os.path.isdir(path):
                return ("path", None, path)
            if os.path.isfile(path):
                return ("path", path, None)
            raise ComposoValidationError(
                f"verify: no CA bundle at {path!r}; give a PEM file or a directory of "
                "certificates, True (the default bundle) or an ssl.SSLContext"
            )
        raise ComposoValidationError(
            "verify: expected True, False, a CA bundle path or an ssl.SSLContext, got "
            f"{type(verify).__name__}"
        )

    @property
    def proxies(self) -> dict[str, httpx.Proxy]:
        """By route name (``all``, ``http``, ``https``)."""
        return dict(self._proxies)

    def route(self, url: httpx.URL) -> str | None:
        """The key of :attr:`proxies` ``url`` goes through, ``None`` for a direct connection."""
        if not self._proxies:
            return None
        return self._routes(url.scheme, url.host, url.port)

    def _route(self, scheme: str, host: str, port: int | None) -> str | None:
        if any(b.matches(scheme, host.lower(), port) for b in self._bypass):
            return None
        if scheme in self._proxies:
            return scheme
        return "all" if "all" in self._proxies else None

    def ssl_context(self) -> ssl.SSLContext:
        """The TLS context: one per CA source for the process, made with the first connections
        (loading a bundle takes tens of ms, which an unused client should not pay)."""
        if self._context is not None:
            return self._context
        ca = self._ca
        assert ca is not None
        # No lock: a fork while another thread held one would leave it held in the child for
        # ever. Two threads' first connections may both build a context; one is kept.
        context = _TLS.get(ca)
        if context is None:
            try:
                made = _make_context(*ca)
            except (OSError, ssl.SSLError) as exc:
                source = "verify" if ca[0] == "path" else "SSL_CERT_FILE / SSL_CERT_DIR"
                raise ComposoValidationError(
                    f"{source}: the CA bundle {ca[1] or ca[2]!r} cannot be loaded ({exc}); "
                    "point it at a PEM file or a directory of certificates"
                ) from None
            context = _TLS.setdefault(ca, made)
        self._context = context
        return context


def _make_context(kind: str, cafile: str | None, capath: str | None) -> ssl.SSLContext:
    if kind == "off":
        return httpx.create_ssl_context(verify=False)
    if kind == "default":
        return httpx.create_ssl_context(verify=True, trust_env=False)
    return ssl.create_default_context(cafile=cafile, capath=capath)


_TLS: dict[tuple[str, str | None, str | None], ssl.SSLContext] = {}
