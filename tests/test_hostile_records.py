"""Every record in the state bucket is untrusted input (issue 19 item 2).

A matrix of hostile payloads × record kinds × commands, through the real front door against the emulator:
each record kind (groundctl's lock, a ledger record, a drift, drill and run record, Pulumi's own lock
file) is planted beside a deployed-looking stack with each payload (a number that overflows a float,
nesting thousands deep, a string where the record's object belongs, an object where a string belongs,
Rich markup, terminal control sequences, a huge field), and every reading command is run. None may exit
70 or print a raw control character; a command that reads the record names its key; `lock break --force`
removes a groundctl lock it cannot read.
"""

from __future__ import annotations

import json
import re
import time

import pytest

from bootstrap.aws.objectstore import ObjectStore
from bootstrap.records import layout
from bootstrap.records.ledger import append_record
from bootstrap.records.runs import iso
from tests.conftest import local_spec_with_bucket
from tests.test_cli_errors import groundctl
from tests.test_state_integrity import base_resources, build_state

ESC = "\x1b"
MARKUP = "[/bold][link=https://evil.example]click[/link]"
CONTROL = f"{ESC}[2J{ESC}]8;;https://evil.example{ESC}\\here{ESC}]8;;{ESC}\\\x07\x9b31m"
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
NOW = iso(time.time())


def _valid(kind: str) -> dict:
    """A record of each kind as groundctl (or Pulumi) writes it."""
    return {
        "lock": {"environment": "local", "owner": "ops", "host": "elsewhere", "pid": 4242, "run_id": "r-1",
                 "started_at": NOW, "heartbeat_at": NOW, "ttl_seconds": 300},
        "ledger": {"lineage": "lin-1", "serial": 2, "sha256": "a" * 64, "version_id": "v2", "previous_sha256": "b" * 64,
                   "operation": "up", "run_id": "r-2", "at": NOW, "git_commit": None, "resources": 3,
                   "stack_key": layout.stack_key("network", "local")},
        "drift": {"check_id": "c-1", "environment": "local", "at": NOW, "drift": False, "drifted_layers": [],
                  "layers": [{"layer": "network", "state": "clean", "summary": "no changes", "counts": {"same": 3},
                              "skipped_reason": None, "changed": 0}]},
        "drill": {"drill_id": "20260101T000000Z-state-loss-abcdef", "kind": "state-loss", "environment": "local",
                  "layer": "network", "started_at": NOW, "total_seconds": 12.5,
                  "verdict": {"outcome": "passed", "reason": "ok", "recovery_seconds": 10.0, "rto_seconds": 1800},
                  "options": {"dry_run": False}, "phases": [{"name": "restore", "status": "achieved", "reason": "ok",
                                                            "message": "done", "attempted": True,
                                                            "started_at": 1.0, "ended_at": 2.0}]},
        "run": {"run_id": "20260101T000000Z-abcdef", "environment": "local", "command": "up", "started_at": NOW,
                "outcome": "failed", "message": "boom", "phases": [], "layers": []},
        "pulumi-lock": {"pid": 4242, "username": "ops", "hostname": "elsewhere", "timestamp": NOW},
    }[kind]


def _strings_to(value, make, keep=lambda s: False):
    if isinstance(value, dict):
        return {k: _strings_to(v, make, keep) for k, v in value.items()}
    if isinstance(value, list):
        return [_strings_to(v, make, keep) for v in value]
    return make(value) if isinstance(value, str) and not keep(value) else value


VERDICTS = ("passed", "failed")  # the outcomes _valid's records hold


def _time(s: str) -> bool:
    return re.match(r"\d{4}-\d\d-\d\dT", s) is not None


def _kept(s: str) -> bool:
    return _time(s) or s in VERDICTS


PAYLOADS = {
    "float-overflow": lambda d: json.dumps(d)[:-1].encode() + b', "extra": 1e400}',
    "deep-nesting": lambda d: json.dumps(d)[:-1].encode() + b', "extra": ' + b"[" * 5000 + b"]" * 5000 + b"}",
    "string-record": lambda d: json.dumps("a record that is only a string").encode(),
    "object-for-string": lambda d: json.dumps(_strings_to(d, lambda s: {"nested": s})).encode(),
    # Markup is text: only the times and the verdicts (an enumeration, checked as one: bootstrap.kit.untrusted.outcome)
    # are left as they were, so the record stays readable and is shown.
    "markup": lambda d: json.dumps(_strings_to(d, lambda s: s + MARKUP, keep=_kept)).encode(),
    "control-sequences": lambda d: json.dumps(_strings_to(d, lambda s: s + CONTROL)).encode(),
    "huge-field": lambda d: json.dumps({**d, **{k: "A" * 2_000_000 for k, v in list(d.items())[:1]}}).encode(),
}

KINDS = ("lock", "ledger", "drift", "drill", "run", "pulumi-lock")


def _key(kind: str) -> str:
    return {
        "lock": layout.lock_key("local"),
        "ledger": layout.ledger_key("network", "local", 2),
        # A name that does not carry the verdict, so `fleet status` reads the record's body.
        "drift": layout.drift_prefix("local") + "written-by-hand.json",
        "drill": layout.drills_prefix("local") + "20260101T000000Z-state-loss-abcdef.json",
        "run": layout.run_key("local", "20260101T000000Z-abcdef"),
        "pulumi-lock": layout.pulumi_locks_prefix("network", "local") + "0b7c9a3e-dead.json",
    }[kind]


COMMANDS = {
    "lock status": ["lock", "status", "SPEC"],
    "status": ["status", "SPEC"],
    "state verify": ["state", "verify", "SPEC", "network"],
    "state versions": ["state", "versions", "SPEC", "network"],
    "recover --dry-run": ["recover", "SPEC", "network", "--dry-run", "--out", "OUT"],
    "drill history": ["drill", "history", "SPEC"],
    "fleet status": ["fleet", "status", "--environments", "ENVS"],
    "lock break --force": ["lock", "break", "SPEC", "--force"],
}

# Which commands read which record (and so must name its key when it cannot be read).
READS = {
    "lock": {"lock status", "status", "recover --dry-run", "lock break --force"},
    "ledger": {"status", "state verify", "recover --dry-run"},
    "drift": {"fleet status"},
    "drill": {"drill history", "fleet status"},
    "run": set(),
    "pulumi-lock": {"lock status"},
}


@pytest.fixture
def planted(aws, emulator_endpoint, tmp_path):
    """A bucket with a stack state and its first ledger record; returns a function that plants a record."""
    def plant(kind: str, body: bytes):
        bucket = f"h-{time.time_ns()}"
        s3 = aws.client("s3")
        s3.create_bucket(Bucket=bucket)
        s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
        store = ObjectStore(s3, bucket)
        state = build_state(base_resources("lin-1"), stack="organization/network/local")
        store.put(layout.stack_key("network", "local"),
                  state.replace(b"::dev::", b"::local::").replace(b"network-dev", b"network-local"))
        append_record(store, "network", "local", operation="up", run_id="r-1", lineage="lin-1", settle_seconds=0)
        store.put(_key(kind), body)
        envs = tmp_path / "envs"
        envs.mkdir()
        spec = local_spec_with_bucket(envs, bucket).rename(envs / "local.yaml")  # fleet status reads the folder
        return store, spec, envs
    return plant


def _run(monkeypatch, capsys, command: str, spec, envs, out, endpoint: str, *extra: str):
    args = [str(spec) if a == "SPEC" else str(envs) if a == "ENVS" else str(out) if a == "OUT" else a
            for a in COMMANDS[command]]
    return groundctl(monkeypatch, capsys, *args, "--endpoint-url", endpoint, *extra)


def _assert_inert(code, out, err):
    assert code != 70 and "internal error" not in err and "Traceback" not in err, err
    raw = RAW.findall(out + err)
    assert not raw, f"raw control characters reached the terminal: {raw!r}\n{out}{err}"[:3000]


def _cases():
    """Every payload for each command that reads the kind; for one that does not, the two payloads that once
    broke readers in passing (a listing that parses what it meets, a printer that shows a key): nesting and
    control sequences. Each command still runs against every kind."""
    for kind in KINDS:
        for command in COMMANDS:
            payloads = PAYLOADS if command in READS[kind] else ("deep-nesting", "control-sequences")
            for payload in payloads:
                yield pytest.param(kind, payload, command, id=f"{kind}-{payload}-{command}")


@pytest.mark.parametrize("kind, payload, command", list(_cases()))
def test_a_hostile_record_is_unreadable_input_never_a_crash_nor_a_terminal_command(
        monkeypatch, capsys, planted, emulator_endpoint, tmp_path, kind, payload, command):
    store, spec, envs = planted(kind, PAYLOADS[payload](_valid(kind)))
    code, out, err = _run(monkeypatch, capsys, command, spec, envs, tmp_path / "out", emulator_endpoint)
    _assert_inert(code, out, err)
    if len(out + err) > 200_000:
        pytest.fail(f"{len(out + err):,} characters printed: a huge field was echoed whole")
    readable = payload in ("markup",)  # markup is text: the record stays readable, and is shown as written
    if command in READS[kind] and not readable:
        shown = out + err
        if command == "fleet status":  # the table names the problem; its JSON names the key
            code, shown, err = _run(monkeypatch, capsys, command, spec, envs, tmp_path / "out", emulator_endpoint,
                                    "--json")
            _assert_inert(code, shown, err)
        assert _key(kind) in " ".join(shown.split()), shown[:3000]
        if command == "fleet status":  # an unreadable record is its row's problem, not the fleet's
            assert code in (0, 1), (code, err)
        elif command not in ("lock break --force", "recover --dry-run"):
            assert code in (1, 3), (code, err)
        # A dry run reports what the recovery would do: an unreadable ledger record is weaker evidence there,
        # named in the lineage phase, and the run goes on by the guide's own rules.
    if command == "lock break --force" and kind == "lock":
        assert code == 0, err
        assert store.get(layout.lock_key("local")) is None  # removed, whatever it held
        kept = [k for k, _s, _m in store.keys(f"{layout.GROUNDCTL}/locks/broken/local/")]
        assert len(kept) == 1  # with the object as it was


@pytest.mark.parametrize("kind", KINDS)
def test_markup_in_a_record_is_printed_as_written(monkeypatch, capsys, planted, emulator_endpoint, tmp_path, kind):
    store, spec, envs = planted(kind, PAYLOADS["markup"](_valid(kind)))
    shown = ""
    for command in READS[kind] - {"lock break --force"}:
        code, out, err = _run(monkeypatch, capsys, command, spec, envs, tmp_path / "out", emulator_endpoint)
        _assert_inert(code, out, err)
        shown += out + err
    if kind in ("lock", "pulumi-lock", "drill"):  # the kinds whose text fields these commands print
        assert MARKUP in shown, shown
