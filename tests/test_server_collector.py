"""The server holds the cyclic collector off while it handles a large body, and only then."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from composo.server import _collector
from composo.server._collector import collector_paused


@pytest.fixture(autouse=True)
def collector_on() -> Iterator[None]:
    was = gc.isenabled()
    gc.enable()
    yield
    if not was:
        gc.disable()


def test_the_collector_is_off_inside_and_back_on_after() -> None:
    with collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_it_comes_back_when_the_last_overlapping_holder_leaves() -> None:
    inside = threading.Event()
    leave = threading.Event()

    def hold() -> None:
        with collector_paused():
            inside.set()
            leave.wait(5)

    other = threading.Thread(target=hold)
    other.start()
    inside.wait(5)
    with collector_paused():
        pass
    assert not gc.isenabled()  # the other holder is still inside
    leave.set()
    other.join(5)
    assert gc.isenabled()


def test_an_error_inside_still_turns_it_back_on() -> None:
    with pytest.raises(ValueError), collector_paused():
        raise ValueError("judge failed")
    assert gc.isenabled()


def test_a_collector_the_user_turned_off_stays_off() -> None:
    gc.disable()
    with collector_paused():
        pass
    assert not gc.isenabled()


def test_holders_that_keep_overlapping_still_get_a_collection(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    runs: list[int] = []

    def seen(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            runs.append(info["generation"])

    monkeypatch.setattr(_collector, "MAX_PAUSE", 0.0)
    gc.callbacks.append(seen)
    try:
        with collector_paused():
            garbage: list[Any] = []
            garbage.append(garbage)  # a cycle only the collector can free
            del garbage
            with collector_paused():  # a second large body, later than MAX_PAUSE
                pass
    finally:
        gc.callbacks.remove(seen)
    assert 2 in runs  # a full pass ran although the collector was held off throughout
