"""Parsing a state pauses the cyclic garbage collector (recovery/state.py `_collector_paused`) and always
leaves it as it found it, whatever the threads or the outcome."""

from __future__ import annotations

import gc
import threading

import pytest

from recovery.state import NotAState, parse_state
from tests.test_state_integrity import build_state


def test_parsing_leaves_the_collector_on_and_a_caller_s_pause_in_place():
    assert gc.isenabled()
    parse_state(build_state())
    assert gc.isenabled()
    gc.disable()
    try:
        parse_state(build_state())
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_the_collector_is_paused_while_the_json_is_decoded(monkeypatch):
    import recovery.state as state

    seen = []
    real = state.load_json
    monkeypatch.setattr(state, "load_json", lambda *a, **k: (seen.append(gc.isenabled()), real(*a, **k))[1])
    parse_state(build_state())
    assert seen == [False] and gc.isenabled()


def test_threads_parsing_side_by_side_leave_the_collector_on():
    data = build_state()
    errors: list[BaseException] = []

    def work():
        try:
            for _ in range(20):
                parse_state(data)
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and gc.isenabled()


@pytest.mark.parametrize("raw", [b'{"version": 3, "checkpoint": [1]}', b"{not json", b"[" * 5000])
def test_a_failed_parse_leaves_the_collector_on(raw):
    with pytest.raises(NotAState):
        parse_state(raw)
    assert gc.isenabled()
