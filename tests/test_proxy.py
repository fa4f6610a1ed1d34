"""The clients work in the user's network as httpx does: through the environment's proxies
(``HTTP_PROXY``, ``HTTPS_PROXY``, ``ALL_PROXY``, ``NO_PROXY``, either case) and CA bundle
(``SSL_CERT_FILE``), or the ones given (``proxy=``, ``verify=``). The server is reached through a
loopback forward proxy under a ``.test`` name only that proxy resolves, so a call that succeeds
went through it; https goes through a small TLS terminator with a CA of the test's own."""

from __future__ import annotations

import base64
import json
import ssl
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
import trustme

from composo import (
    APIConnectionError,
    APITimeoutError,
    AsyncComposo,
    Composo,
    ComposoValidationError,
)
from tests.support.cli import run_cli
from tests.support.forward_proxy import ForwardProxy, Socks5Proxy, Stall, TlsTerminator
from tests.support.servers import ServerProcess, free_port

NAME = "composo.test"  # resolves nowhere but in the proxy
QA = [
    {"role": "user", "content": "What is the refund window?"},
    {"role": "assistant", "content": "Thirty days from delivery."},
]
CRITERION = "Reward answers that state the refund window"
REWARD = f"POST http://{NAME}/api/v1/evals/reward"
VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY")


@pytest.fixture(autouse=True)
def no_proxy_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test starts with none of the machine's proxy variables (either case)."""
    for name in VARIABLES:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)


def port_of(live: ServerProcess) -> int:
    port = urlsplit(live.base_url).port
    assert port is not None
    return port


@pytest.fixture
def proxy(live: ServerProcess) -> Iterator[ForwardProxy]:
    """A forward proxy to the local server, known to it as ``composo.test`` and as itself."""
    port = port_of(live)
    with ForwardProxy({NAME: ("127.0.0.1", port), "127.0.0.1": ("127.0.0.1", port)}) as p:
        yield p


@pytest.fixture
def tls(live: ServerProcess, tmp_path: Path) -> Iterator[tuple[TlsTerminator, Path]]:
    """https for ``composo.test`` in front of the local server, and the file of its CA."""
    ca = trustme.CA()
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert(NAME).configure_cert(context)
    bundle = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(bundle))
    with TlsTerminator(port_of(live), context) as terminator:
        yield terminator, bundle


@pytest.fixture
def https_proxy(tls: tuple[TlsTerminator, Path]) -> Iterator[ForwardProxy]:
    with ForwardProxy({NAME: ("127.0.0.1", tls[0].port)}) as p:
        yield p


def trust(monkeypatch: pytest.MonkeyPatch, bundle: Path | None) -> None:
    """``SSL_CERT_FILE`` names ``bundle`` (``None``: neither it nor ``SSL_CERT_DIR`` is set)."""
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    if bundle is None:
        monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    else:
        monkeypatch.setenv("SSL_CERT_FILE", str(bundle))


# -- the environment's proxies ------------------------------------------------------------------


@pytest.mark.parametrize("variable", ["HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"])
def test_sync_client_and_its_account_methods_go_through_the_environments_proxy(
    live: ServerProcess, proxy: ForwardProxy, monkeypatch: pytest.MonkeyPatch, variable: str
) -> None:
    monkeypatch.setenv(variable, proxy.url)
    with Composo(api_key=live.api_key, base_url=f"http://{NAME}") as c:
        assert c.evaluate(messages=QA, criteria=CRITERION).score is not None
        assert c.usage() is not None
    assert proxy.seen == [REWARD, f"GET http://{NAME}/api/v1/usage"]


async def test_async_client_goes_through_the_environments_proxy(
    live: ServerProcess, proxy: ForwardProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HTTP_PROXY", proxy.url)
    async with AsyncComposo(api_key=live.api_key, base_url=f"http://{NAME}") as c:
        assert (await c.evaluate(messages=QA, criteria=CRITERION)).score is not None
        results = await c.evaluate_many([{"messages": QA}] * 3, CRITERION)
        assert all(r.ok for r in results)
        assert await c.usage() is not None
    assert proxy.seen.count(REWARD) == 4


def test_a_cached_answer_is_served_without_reaching_the_proxy(
    live: ServerProcess, proxy: ForwardProxy, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The cache sits over the connections: a repeated request stops there."""
    monkeypatch.setenv("HTTP_PROXY", proxy.url)
    for _ in range(2):
        with Composo(api_key=live.api_key, base_url=f"http://{NAME}", cache=tmp_path) as c:
            c.evaluate(messages=QA, criteria=CRITERION)
    assert proxy.seen == [REWARD]


@pytest.mark.parametrize(
    ("no_proxy", "proxied"),
    [
        ("127.0.0.1", False),
        ("localhost, 127.0.0.1", False),
        ("*", False),
        ("example.com", True),
        ("http://127.0.0.1", False),
        ("https://127.0.0.1", True),
        ("127.0.0.1:1", True),
    ],
)
def test_no_proxy_sends_those_hosts_direct_as_httpx_does(
    live: ServerProcess,
    proxy: ForwardProxy,
    monkeypatch: pytest.MonkeyPatch,
    no_proxy: str,
    proxied: bool,
) -> None:
    monkeypatch.setenv("HTTP_PROXY", proxy.url)
    monkeypatch.setenv("no_proxy" if "," in no_proxy else "NO_PROXY", no_proxy)
    with httpx.Client() as plain:  # httpx's own reading of the same environment
        assert plain.get(f"{live.base_url}/api/healthcheck").status_code == 200
    assert bool(proxy.seen) is proxied
    proxy.seen.clear()
    with Composo(api_key=live.api_key, base_url=live.base_url) as c:
        c.evaluate(messages=QA, criteria=CRITERION)
    assert bool(proxy.seen) is proxied


def test_a_network_in_no_proxy_covers_its_addresses(
    live: ServerProcess, proxy: ForwardProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As curl and requests read it (httpx matches only the network's first address)."""
    monkeypatch.setenv("HTTP_PROXY", proxy.url)
    monkeypatch.setenv("NO_PROXY", "10.0.0.0/8,127.0.0.0/8")
    with Composo(api_key=live.api_key, base_url=live.base_url) as c:
        c.evaluate(messages=QA, criteria=CRITERION)
    assert proxy.seen == []


def test_no_proxy_for_a_name_only_the_proxy_knows_fails_to_resolve_it(
    live: ServerProcess, proxy: ForwardProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HTTP_PROXY", proxy.url)
    monkeypatch.setenv("NO_PROXY", "test")  # the domain and its subdomains
    with (
        Composo(api_key=live.api_key, base_url=f"http://{NAME}", timeout=10) as c,
        pytest.raises(APIConnectionError),
    ):
        c.evaluate(messages=QA, criteria=CRITERION)
    assert proxy.seen == []


def test_trust_env_false_reads_no_proxy_from_the_environment(
    live: ServerProcess, proxy: ForwardProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HTTP_PROXY", proxy.url)
    with Composo(api_key=live.api_key, base_url=live.base_url, trust_env=False) as c:
        c.evaluate(messages=QA, criteria=CRITERION)
    assert proxy.seen == []


# -- a proxy given ------------------------------------------------------------------------------


def test_proxy_argument_takes_every_request_with_its_credentials(
    live: ServerProcess, proxy: ForwardProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NO_PROXY", "*")  # as in httpx: a proxy given is not bypassed
    address = proxy.url.replace("http://", "http://ana:s3cret@")
    with Composo(api_key=live.api_key, base_url=f"http://{NAME}", proxy=address) as c:
        c.evaluate(messages=QA, criteria=CRITERION)
        assert "s3cret" not in repr(c)
    assert proxy.seen == [REWARD]
    assert proxy.auth == ["Basic " + base64.b64encode(b"ana:s3cret").decode()]


async def test_async_proxy_argument(live: ServerProcess, proxy: ForwardProxy) -> None:
    async with AsyncComposo(
        api_key=live.api_key, base_url=f"http://{NAME}", proxy=httpx.Proxy(proxy.url)
    ) as c:
        await c.evaluate(messages=QA, criteria=CRITERION)
    assert proxy.seen == [REWARD]


@pytest.mark.parametrize("flavour", ["sync", "async"])
async def test_a_socks5_proxy_from_all_proxy(
    live: ServerProcess, monkeypatch: pytest.MonkeyPatch, flavour: str
) -> None:
    with Socks5Proxy({NAME: ("127.0.0.1", port_of(live))}) as socks:
        monkeypatch.setenv("ALL_PROXY", socks.url)
        settings = {"api_key": live.api_key, "base_url": f"http://{NAME}"}
        if flavour == "sync":
            with Composo(**settings) as c:
                assert c.evaluate(messages=QA, criteria=CRITERION).score is not None
        else:
            async with AsyncComposo(**settings) as ac:
                assert (await ac.evaluate(messages=QA, criteria=CRITERION)).score is not None
        assert socks.seen == [f"CONNECT {NAME}:80"]


def test_a_socks5_proxy_without_socksio_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "socksio", None)  # as if it were not installed
    monkeypatch.setenv("ALL_PROXY", "socks5://127.0.0.1:1080")
    with pytest.raises(ComposoValidationError, match=r"^ALL_PROXY .*httpx\[socks\]"):
        Composo(api_key="k")


def test_an_unreachable_proxy_is_a_connection_error_that_shows_no_credentials() -> None:
    address = f"http://ana:s3cret@127.0.0.1:{free_port()}"
    with (
        Composo(api_key="k", base_url=f"http://{NAME}", proxy=address, timeout=5) as c,
        pytest.raises(APIConnectionError) as caught,
    ):
        c.evaluate(messages=QA, criteria=CRITERION)
    assert "s3cret" not in str(caught.value)


@pytest.mark.parametrize(
    ("settings", "named"),
    [
        ({"proxy": "ftp://ana:s3cret@proxy.example"}, "proxy"),
        ({"proxy": 3128}, "proxy"),
        ({"verify": "/no/such/ca.pem"}, "verify"),
        ({"verify": 1}, "verify"),
        ({"trust_env": "no"}, "trust_env"),
        ({"proxy": "http://proxy.example:3128", "http_client": True}, "proxy"),
        ({"verify": False, "http_client": True}, "verify"),
    ],
)
def test_unusable_network_settings_are_refused_at_construction(
    settings: dict[str, Any], named: str
) -> None:
    with httpx.Client() as http, pytest.raises(ComposoValidationError) as caught:
        Composo(
            api_key="k",
            **{**settings, "http_client": http if settings.get("http_client") else None},
        )
    assert str(caught.value).startswith(f"{named}:")
    assert "s3cret" not in str(caught.value)


@pytest.mark.parametrize(
    ("variable", "value"),
    [("HTTPS_PROXY", "ftp://ana:s3cret@proxy.example"), ("SSL_CERT_FILE", "/no/such/ca.pem")],
)
def test_unusable_variables_are_named_at_construction(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(ComposoValidationError, match=f"^{variable}") as caught:
        AsyncComposo(api_key="k")
    assert "s3cret" not in str(caught.value)
    AsyncComposo(api_key="k", trust_env=False)  # opting out reads neither


def test_an_unreadable_ca_bundle_is_refused_before_any_request(
    live: ServerProcess, tmp_path: Path
) -> None:
    bundle = tmp_path / "ca.pem"
    bundle.write_text("not a certificate\n")
    with (
        Composo(api_key=live.api_key, base_url=live.base_url, verify=bundle) as c,
        pytest.raises(ComposoValidationError, match=r"^verify: the CA bundle"),
    ):
        c.evaluate(messages=QA, criteria=CRITERION)
    assert live.requests() == []


# -- https through the proxy: CONNECT, and the CA bundle -----------------------------------------


def test_https_through_the_proxy_with_ssl_cert_file(
    live: ServerProcess,
    https_proxy: ForwardProxy,
    tls: tuple[TlsTerminator, Path],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", https_proxy.url)
    trust(monkeypatch, tls[1])
    with Composo(api_key=live.api_key, base_url=f"https://{NAME}") as c:
        assert c.evaluate(messages=QA, criteria=CRITERION).score is not None
    assert https_proxy.seen == [f"CONNECT {NAME}:443"]


async def test_async_https_through_the_proxy_with_ssl_cert_file(
    live: ServerProcess,
    https_proxy: ForwardProxy,
    tls: tuple[TlsTerminator, Path],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", https_proxy.url)
    trust(monkeypatch, tls[1])
    async with AsyncComposo(api_key=live.api_key, base_url=f"https://{NAME}") as c:
        assert (await c.evaluate(messages=QA, criteria=CRITERION)).score is not None
    assert https_proxy.seen == [f"CONNECT {NAME}:443"]


@pytest.mark.parametrize("flavour", ["sync", "async"])
async def test_https_without_the_ca_is_refused(
    live: ServerProcess,
    https_proxy: ForwardProxy,
    monkeypatch: pytest.MonkeyPatch,
    flavour: str,
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", https_proxy.url)
    trust(monkeypatch, None)
    settings = {"api_key": live.api_key, "base_url": f"https://{NAME}", "timeout": 10}
    with pytest.raises(APIConnectionError, match="CERTIFICATE_VERIFY_FAILED"):
        if flavour == "sync":
            with Composo(**settings) as c:
                c.evaluate(messages=QA, criteria=CRITERION)
        else:
            async with AsyncComposo(**settings) as ac:
                await ac.evaluate(messages=QA, criteria=CRITERION)
    assert https_proxy.seen and set(https_proxy.seen) == {f"CONNECT {NAME}:443"}


def test_verify_argument_names_the_ca_bundle(
    live: ServerProcess,
    https_proxy: ForwardProxy,
    tls: tuple[TlsTerminator, Path],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    trust(monkeypatch, None)
    with Composo(
        api_key=live.api_key, base_url=f"https://{NAME}", proxy=https_proxy.url, verify=tls[1]
    ) as c:
        assert c.evaluate(messages=QA, criteria=CRITERION).score is not None


# -- the deadline holds through a proxy ---------------------------------------------------------


SLOW = [("http", "silent"), ("https", "silent"), ("https", "drip")]


@pytest.mark.parametrize(("scheme", "stall"), SLOW)
def test_sync_call_ends_at_its_timeout_when_the_proxy_stalls(
    monkeypatch: pytest.MonkeyPatch, scheme: str, stall: Stall
) -> None:
    with ForwardProxy({}, stall=stall) as stalled:
        monkeypatch.setenv(f"{scheme.upper()}_PROXY", stalled.url)
        with Composo(api_key="k", base_url=f"{scheme}://{NAME}", timeout=1) as c:
            start = time.monotonic()
            with pytest.raises(APITimeoutError):
                c.evaluate(messages=QA, criteria=CRITERION)
            assert time.monotonic() - start < 10  # ends near 1 s, not when the proxy gives up
        assert stalled.seen  # it was the proxy that held it


@pytest.mark.parametrize(("scheme", "stall"), SLOW[1:])
async def test_async_call_ends_at_its_timeout_when_the_proxy_stalls(
    monkeypatch: pytest.MonkeyPatch, scheme: str, stall: Stall
) -> None:
    with ForwardProxy({}, stall=stall) as stalled:
        monkeypatch.setenv("HTTPS_PROXY", stalled.url)
        async with AsyncComposo(api_key="k", base_url=f"{scheme}://{NAME}", timeout=1) as c:
            start = time.monotonic()
            with pytest.raises(APITimeoutError):
                await c.evaluate(messages=QA, criteria=CRITERION)
            assert time.monotonic() - start < 10
        assert stalled.seen


# -- the command line, background evaluation and the integrations --------------------------------


def _conversations(tmp_path: Path) -> Path:
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps({"id": f"q{i}", "messages": QA}) + "\n" for i in range(3)))
    return data


@pytest.mark.parametrize("command", ["evaluate", "evaluate-traces", "history", "usage"])
def test_cli_commands_go_through_the_environments_proxy(
    live: ServerProcess,
    proxy: ForwardProxy,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    command: str,
) -> None:
    monkeypatch.setenv("HTTP_PROXY", proxy.url)
    server = ["--base-url", f"http://{NAME}", "--api-key", live.api_key]
    out = tmp_path / "out.jsonl"
    if command == "evaluate":
        args = [command, _conversations(tmp_path), "-c", CRITERION, "-o", out, *server]
    elif command == "evaluate-traces":
        traces = Path(__file__).resolve().parents[1] / "examples" / "data" / "traces.jsonl"
        args = [command, traces, "-c", "Reward agents that finish the task", "-o", out, *server]
    elif command == "history":
        args = [command, "--tag", "run=proxy", "-o", tmp_path / "history.jsonl", *server]
    else:
        args = [command, *server]
    done = run_cli(*args)
    assert done.returncode == 0, done.stderr
    if command.startswith("evaluate"):
        rows = [json.loads(x) for x in out.read_text().splitlines()]
        assert rows and all(r["error"] is None for r in rows)
    assert proxy.seen and all(f"http://{NAME}/" in seen for seen in proxy.seen)


def test_cli_https_through_the_proxy_with_ssl_cert_file(
    live: ServerProcess,
    https_proxy: ForwardProxy,
    tls: tuple[TlsTerminator, Path],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", https_proxy.url)
    trust(monkeypatch, tls[1])
    out = tmp_path / "out.jsonl"
    server = ["--base-url", f"https://{NAME}", "--api-key", live.api_key]
    done = run_cli("evaluate", _conversations(tmp_path), "-c", CRITERION, "-o", out, *server)
    assert done.returncode == 0, done.stderr
    assert all(json.loads(x)["error"] is None for x in out.read_text().splitlines())
    assert set(https_proxy.seen) == {f"CONNECT {NAME}:443"}


def test_cli_local_server_is_reached_directly(
    proxy: ForwardProxy, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """``--local`` starts its server in the process, on loopback: no proxy between."""
    monkeypatch.setenv("HTTP_PROXY", proxy.url)
    out = tmp_path / "out.jsonl"
    done = run_cli("evaluate", _conversations(tmp_path), "-c", CRITERION, "-o", out, "--local")
    assert done.returncode == 0, done.stderr
    assert all(json.loads(x)["error"] is None for x in out.read_text().splitlines())
    assert proxy.seen == []


def test_background_evaluation_goes_through_the_environments_proxy(
    live: ServerProcess, proxy: ForwardProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    from composo.ext import BackgroundEvaluator

    monkeypatch.setenv("HTTP_PROXY", proxy.url)
    monkeypatch.setenv("COMPOSO_API_KEY", live.api_key)
    monkeypatch.setenv("COMPOSO_BASE_URL", f"http://{NAME}")
    with BackgroundEvaluator(CRITERION) as ev:  # its own client, from the environment
        ev.submit("r1", "evaluate", lambda: {"messages": QA})
        assert ev.flush(timeout=30)
    [record] = ev.results
    assert record.ok, record.error
    assert proxy.seen == [REWARD]


def test_langchain_callback_goes_through_the_environments_proxy(
    live: ServerProcess, proxy: ForwardProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("langchain_composo")  # the core's own range checks run without it
    from langchain_composo import ComposoCallback
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage

    monkeypatch.setenv("HTTP_PROXY", proxy.url)
    monkeypatch.setenv("COMPOSO_API_KEY", live.api_key)
    monkeypatch.setenv("COMPOSO_BASE_URL", f"http://{NAME}")
    callback = ComposoCallback(criteria=CRITERION)
    model = GenericFakeChatModel(messages=iter([AIMessage("Thirty days from delivery.")]))
    model.invoke("What is the refund window?", config={"callbacks": [callback]})
    assert callback.flush(timeout=30)
    [record] = callback.results
    assert record.ok, record.error
    assert proxy.seen == [REWARD]


async def test_llamaindex_evaluator_keeps_the_given_clients_proxy(
    live: ServerProcess, proxy: ForwardProxy
) -> None:
    """The evaluator makes an async client per event loop from the sync one it was given: that
    client goes through the same proxy (none is set in the environment)."""
    pytest.importorskip("llama_index.evaluation.composo")
    from llama_index.evaluation.composo import ComposoEvaluator

    given = Composo(api_key=live.api_key, base_url=f"http://{NAME}", proxy=proxy.url)
    evaluator = ComposoEvaluator(CRITERION, client=given, raise_on_error=True)
    result = await evaluator.aevaluate(
        query="What is the refund window?", response="Thirty days from delivery."
    )
    assert result.score is not None
    assert proxy.seen == [REWARD]
    await evaluator.aclose()
    given.close()
