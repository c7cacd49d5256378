"""The shared reader of untrusted JSON and the console's inert output (issue 19 item 2), as units."""

from __future__ import annotations

import json

import pytest

from bootstrap.kit import console
from bootstrap.kit.untrusted import (MAX_RECORD_DEPTH, Unreadable, decode_json, epoch, inert, load_record, one_line, text,
                                 whole)


@pytest.mark.parametrize("body, why", [
    (b'{"a": 1e400}', "too large for a float"),
    (b'{"a": -1e400}', "too large for a float"),
    (b'{"a": NaN}', "'NaN' is not a JSON value"),
    (b'{"a": ' + b"9" * 5000 + b"}", "not valid JSON"),
    (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
    (b'{"a": ' + b"[" * (MAX_RECORD_DEPTH + 1) + b"]" * (MAX_RECORD_DEPTH + 1) + b"}", "levels deep"),
    (b'"a string"', "a JSON string, not the object"),
    (b"[1, 2]", "a JSON array, not the object"),
    (b"{", "not valid JSON"),
    (b"x" * 2_000_000, "over the 1,048,576-byte limit"),
    (None, "removed while it was being read"),
])
def test_a_record_that_is_not_one_is_unreadable_naming_its_key(body, why):
    with pytest.raises(Unreadable) as raised:
        load_record(body, ".groundctl/locks/dev.json")
    assert raised.value.source == ".groundctl/locks/dev.json" and why in raised.value.reason
    assert ".groundctl/locks/dev.json" in str(raised.value)


def test_fields_are_checked_for_type_size_and_control_characters():
    with pytest.raises(ValueError, match="'owner' is a object, not a string"):
        text({"owner": {"a": 1}}, "owner")
    with pytest.raises(ValueError, match="control characters"):
        text({"owner": "ops\x1b[2J"}, "owner")
    with pytest.raises(ValueError, match="over the limit"):
        text({"owner": "a" * 5000}, "owner")
    with pytest.raises(ValueError, match="not a whole number"):
        whole({"pid": True}, "pid")
    with pytest.raises(ValueError, match="outside"):
        whole({"pid": 10 ** 30}, "pid", high=1 << 22)
    assert epoch("2026-12-03T15:01:51.123456789Z") == pytest.approx(epoch("2026-12-03T15:01:51.123456Z"))
    with pytest.raises(ValueError, match="not an ISO 8601 time"):
        epoch("yesterday")


def test_state_files_share_the_decoder():
    from recovery.state.state_bytes import NotAState, load_json

    with pytest.raises(NotAState, match="too large for a float"):
        load_json(b'{"version": 3, "x": 1e400}', "s")
    with pytest.raises(NotAState, match="nested too deeply to be a state"):
        load_json(b"[" * 100_000, "s")
    assert decode_json('{"a": 1.5}') == {"a": 1.5}


@pytest.mark.parametrize("hostile", ["\x1b[2J", "\x1b]8;;https://evil.example\x1b\\link\x1b]8;;\x1b\\", "\x07",
                                     "\x9b31m", "\u202eevil", "\r overwritten"])
def test_the_console_prints_every_control_character_as_its_escape(capsys, hostile):
    from rich.table import Table
    from rich.text import Text

    table = Table(title=f"t{hostile}")
    table.add_column("c")
    table.add_row(f"[bold]cell{hostile}")
    table.add_row(Text(f"text{hostile}"))
    console.data(table)
    console.data(f"data{hostile}")
    console.info(f"info{hostile}")
    console.warn(f"warn{hostile}")
    console.error(f"error{hostile}")
    console.step(f"step{hostile}")
    out, err = capsys.readouterr()
    for stream in (out, err):
        assert not any(ch in stream for ch in "\x1b\x07\x9b\u202e\r"), repr(stream)
    assert "[bold]cell" in out and inert(hostile) in out and inert(hostile) in err
    console.emit_json({"v": hostile})
    out = capsys.readouterr().out
    assert json.loads(out) == {"v": hostile} and not any(ch in out for ch in "\x1b\x07\x9b\u202e\r")


def test_inert_keeps_what_groundctls_own_messages_use():
    assert inert("line one\n\tline two — ok [x]") == "line one\n\tline two — ok [x]"
    assert inert("a\x1bb") == "a\\x1bb"


def test_one_line_quotes_an_outside_value_inside_a_paragraph():
    # A CLI's stderr or a path from the environment: its newline, escape and bidirectional override shown as
    # escapes, its trailing newline dropped, and a long one cut with how much was left out.
    assert one_line("  exited: bad\x1b[31m\nsecond line\u202e\n") == "exited: bad\\x1b[31m\\nsecond line\\u202e"
    assert one_line("/opt/pulumi/bin") == "/opt/pulumi/bin"
    # What hides or breaks text without being a control character: a zero-width space, a line separator.
    assert one_line("pulu\u200bmi\u2028v3\ufeff") == "pulu\\u200bmi\\u2028v3\\ufeff"
    # A record may hold them (a joiner in an emoji): it is read, and printed inert.
    assert text({"reason": "ok \u200d done"}, "reason") == "ok \u200d done"
    long = one_line("x" * 500)
    assert long == "x" * 120 + "… (380 more characters)"
    assert one_line("\x1b" * 100) == "\\x1b" * 30 + "… (280 more characters)"  # the bound is on what is shown


def test_a_recovery_report_shows_control_characters_as_escapes():
    from recovery.restoring.report import render_markdown

    phase = {"phase": "assess", "status": "refused", "reason": "LockHeld", "attempted": True, "details": {},
             "message": "held by ops\x1b]8;;https://evil.example\x1b\\here", "next_step": "wait"}
    md = render_markdown({"layer": "network", "environment": "dev\x1b[2J", "run_id": "r", "started_at": "s",
                          "finished_at": "f", "options": {}, "outcome": "refused", "complete": False, "exit_code": 3,
                          "state_downloads": 0, "phases": [phase]})
    assert "\x1b" not in md and "dev\\x1b[2J" in md and "held by ops\\x1b]8;;" in md
