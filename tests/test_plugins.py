"""Plugins: registered objects and entry-point packages convert what the core does not know."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

import composo
from composo import Composo, ComposoValidationError
from composo.plugins import get_plugin_manager
from tests.support.servers import ServerProcess


@dataclass
class Ticket:
    question: str
    answer: str


class TicketPlugin:
    @composo.hookimpl
    def composo_convert_messages(self, obj: Any) -> list[dict[str, Any]] | None:
        if isinstance(obj, Ticket):
            return [
                {"role": "user", "content": obj.question},
                {"role": "assistant", "content": obj.answer},
            ]
        return None

    @composo.hookimpl
    def composo_supported_types(self, kind: str) -> list[str] | None:
        return ["a Ticket"] if kind == "messages" else None


@pytest.fixture
def ticket_plugin() -> Iterator[None]:
    pm = get_plugin_manager()
    pm.register(TicketPlugin(), name="test.tickets")
    try:
        yield
    finally:
        pm.unregister(name="test.tickets")


def test_registered_plugin_converts_its_type(
    ticket_plugin: None, client: Composo, live: ServerProcess
) -> None:
    result = client.evaluate(
        messages=Ticket("Reset my password?", "Use the link."), criteria="Reward a"
    )
    assert result.score is not None
    assert live.requests()[0]["body"]["messages"][0] == {
        "role": "user",
        "content": "Reset my password?",
    }


def test_unknown_object_lists_supported_types_and_how_to_add_one(ticket_plugin: None) -> None:
    c = Composo(api_key="k", base_url="http://127.0.0.1:9")
    with c, pytest.raises(ComposoValidationError) as info:
        c.evaluate(messages={1, 2}, criteria="Reward a")
    text = str(info.value)
    assert text.startswith("messages: cannot use a set.")
    assert "a Ticket" in text and "message dicts" in text
    assert "composo_convert_" in text and "entry-point" in text


def test_unregistered_plugin_is_no_longer_asked() -> None:
    pm = get_plugin_manager()
    pm.register(TicketPlugin(), name="test.tickets")
    pm.unregister(name="test.tickets")
    with (
        Composo(api_key="k", base_url="http://127.0.0.1:9") as c,
        pytest.raises(ComposoValidationError),
    ):
        c.evaluate(messages=Ticket("q", "a"), criteria="Reward a")


def test_builtins_are_plugins_like_any_other() -> None:
    names = {name for name, _ in get_plugin_manager().list_name_plugin()}
    assert {"composo.basic", "composo.openai_chat", "composo.openai_responses"} <= names


def test_entry_point_plugin_is_discovered(live: ServerProcess) -> None:
    # examples/plugin_example is installed (requirements-dev.txt) and never imported by the core:
    # a fresh interpreter must find it through the `composo` entry-point group alone.
    code = textwrap.dedent(
        f"""
        from composo import Composo
        from composo_plugin_example import Transcript
        c = Composo(api_key={live.api_key!r}, base_url={live.base_url!r})
        r = c.evaluate(messages=Transcript(["Where is my parcel?", "It ships tomorrow."]),
                       criteria="Reward answers that address the customer's question")
        print("score", r.score)
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("score ")
    assert live.requests()[0]["body"]["messages"][1] == {
        "role": "assistant",
        "content": "It ships tomorrow.",
    }


def test_import_composo_stays_light() -> None:
    code = (
        "import sys, composo; heavy = ('openai', 'langchain', 'langchain_core', 'llama_index', "
        "'opentelemetry', 'fastapi', 'uvicorn'); "
        "print(sorted({m.split('.')[0] for m in sys.modules} & set(heavy)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_a_broken_installed_plugin_is_skipped_with_a_warning(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import importlib.metadata

    import pluggy

    from composo._core import hookspecs
    from composo._core.plugins import _load_entry_points

    good = importlib.metadata.EntryPoint(
        name="transcript", value="composo_plugin_example.plugin", group="composo"
    )
    broken = importlib.metadata.EntryPoint(
        name="broken", value="no_such_module_for_composo", group="composo"
    )
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda group: [broken, good])
    pm = pluggy.PluginManager("composo")
    pm.add_hookspecs(hookspecs)
    caplog.set_level("WARNING", logger="composo")
    _load_entry_points(pm)
    assert pm.get_plugin("transcript") is not None
    assert pm.get_plugin("broken") is None
    assert "'broken'" in caplog.text and "skipped" in caplog.text


def test_a_package_above_the_core_declares_its_own_hooks() -> None:
    from composo._core import hookspecs
    from composo.plugins import add_hookspecs, hookimpl, hookspec

    class Specs:
        @hookspec(firstresult=True)
        def composo_test_colour(self, name: str) -> str | None: ...

    class Impl:
        @hookimpl
        def composo_test_colour(self, name: str) -> str | None:
            return f"{name} is blue"

    pm = get_plugin_manager()
    pm.register(Impl(), name="test.colour")
    try:
        add_hookspecs(Specs)  # after the manager is built: taken at once, impls verified
        assert pm.hook.composo_test_colour(name="sky") == "sky is blue"
    finally:
        pm.unregister(name="test.colour")
    # tracing declares its hook itself; the core's specifications do not name it
    import composo.tracing._instruments  # noqa: F401

    assert not hasattr(hookspecs, "composo_instruments")
    assert pm.hook.composo_instruments.spec is not None
