"""Candidates on the emulator: listing every copy, lazy evaluation, no double downloads, ledger matching."""

from __future__ import annotations

import gzip
import hashlib
import json
import time
from dataclasses import replace

import pytest

from bootstrap.records import layout
from bootstrap.aws.objectstore import ObjectStore
from recovery.choice.evaluator import CandidateEvaluator
from recovery.choice.versions import LedgerRef, list_candidates, match_ledger
from tests.fakes.engine import FakeResource, InMemoryEngine
from tests.test_state_integrity import base_resources, build_state

PROJECT, STACK = "network", "dev"
EXPECTED = f"organization/{PROJECT}/{STACK}"
KEY = layout.stack_key(PROJECT, STACK)


class CountingStore(ObjectStore):
    """The real store, counting downloads per (key, version) and listing in small pages."""

    def __init__(self, client, bucket, page_size=1000):
        super().__init__(client, bucket)
        self.gets: list[tuple[str, str | None]] = []
        self.page_size = page_size

    def get(self, key, version_id=None):
        self.gets.append((key, version_id))
        return super().get(key, version_id)

    def versions(self, prefix, page_size=1000):
        return super().versions(prefix, page_size=self.page_size)


@pytest.fixture
def store(aws, bucket):
    return CountingStore(aws.client("s3"), bucket)


def state(n: int, lineage: str = "lin-1") -> bytes:
    """An integral checkpoint whose content differs with `n`."""
    rs = base_resources(lineage)
    rs[2]["outputs"] = {"generation": n}
    return build_state(rs, stack=EXPECTED)


def test_lists_every_copy_with_its_source(store):
    v1 = store.put(KEY, state(1))
    store.put(KEY + ".bak", state(1))
    v2 = store.put(KEY, state(2))
    store.put(f"{layout.history_prefix(PROJECT, STACK)}{STACK}-1764633600000000000.checkpoint.json", state(2))
    store.put(f"{layout.history_prefix(PROJECT, STACK)}{STACK}-1764633600000000000.history.json", b"{}")
    store.put(f"{layout.backups_prefix(PROJECT, STACK)}{STACK}.1764633600000000001.json", state(1))
    store.put(layout.stack_key(PROJECT, "prod"), state(9))      # another stack: not a candidate
    store.put(layout.stack_key(PROJECT, STACK + "x"), state(9))  # a name that merely starts the same

    cset = list_candidates(store, PROJECT, STACK)
    by_source = {}
    for c in cset.candidates:
        by_source.setdefault(c.source, []).append(c)
    assert {s: len(v) for s, v in by_source.items()} == {"current": 1, "version": 1, "bak": 1, "history": 1, "backup": 1}
    assert by_source["current"][0].version_id == v2 and by_source["version"][0].version_id == v1
    assert not cset.current_deleted and cset.delete_markers == ()
    assert store.gets == []  # listing downloads nothing
    times = [c.last_modified for c in cset.candidates]
    assert times == sorted(times, reverse=True)


def test_delete_markers_are_on_the_timeline_not_candidates(store):
    store.put(KEY, state(1))
    store.delete(KEY)
    cset = list_candidates(store, PROJECT, STACK)
    assert [c.source for c in cset.candidates] == ["version"]
    assert len(cset.delete_markers) == 1 and cset.delete_markers[0].is_latest
    assert cset.current_deleted
    assert [kind for _, kind, _ in cset.timeline()] == ["delete-marker", "candidate"]


def test_pagination_lists_everything(aws, bucket):
    small_pages = CountingStore(aws.client("s3"), bucket, page_size=3)
    ids = [small_pages.put(KEY, state(i)) for i in range(10)]
    cset = list_candidates(small_pages, PROJECT, STACK)
    assert [c.version_id for c in cset.candidates] == list(reversed(ids))  # newest first, none lost
    assert cset.candidates[0].source == "current"


def test_compressed_stack_objects_are_candidates(store):
    store.put(KEY + ".gz", gzip.compress(state(1)))
    cset = list_candidates(store, PROJECT, STACK)
    (c,) = CandidateEvaluator(store, EXPECTED).newest_first(cset.candidates)
    assert (c.source, c.verdict, c.lineage) == ("current", "integral", "lin-1")


def test_first_integral_stops_early_and_never_downloads_twice(store):
    for i in range(6):
        store.put(KEY, state(i))
    store.put(KEY, state(6)[:100])  # the newest is truncated
    cset = list_candidates(store, PROJECT, STACK)
    ev = CandidateEvaluator(store, EXPECTED)
    chosen = ev.first_integral(cset.candidates)
    assert chosen.version_id == cset.candidates[1].version_id and chosen.verdict == "integral"
    assert ev.downloads == 2 and len(store.gets) == 2
    # Evaluating again, and loading the chosen document, costs nothing more.
    again = [ev.evaluate(c) for c in cset.candidates[:2]]
    assert again[0].verdict == "unreadable" and "not valid JSON" in again[0].evaluation.error
    assert ev.load(chosen).lineage == "lin-1"
    assert len(store.gets) == 2 == len(set(store.gets))


def test_identical_copies_share_one_download(store):
    body = state(1)
    store.put(KEY, body)
    store.put(KEY + ".bak", body)
    cset = list_candidates(store, PROJECT, STACK)
    ev = CandidateEvaluator(store, EXPECTED)
    judged = list(ev.newest_first(cset.candidates))
    assert ev.downloads == 1
    assert {c.sha256 for c in judged} == {judged[0].sha256}
    assert sorted(c.evaluation.via for c in judged) == ["download", "etag-equal"]


def test_verdicts_cover_damage_foreign_stacks_and_pending_operations(store):
    pending = [{"type": "creating", "resource": {"urn": "urn:pulumi:dev::network::aws:ec2/eip:Eip::nat",
                                                 "type": "aws:ec2/eip:Eip", "custom": True}}]
    store.put(KEY, build_state(stack=EXPECTED, pending=pending))
    store.put(KEY, build_state(stack="organization/network/prod"))
    rs = base_resources()
    rs[1], rs[2] = rs[2], rs[1]
    store.put(KEY, build_state(rs, stack=EXPECTED))
    cset = list_candidates(store, PROJECT, STACK)
    damaged, foreign, pending_one = CandidateEvaluator(store, EXPECTED).newest_first(cset.candidates)
    assert damaged.verdict == "damaged" and damaged.evaluation.findings[0].code == "provider-after-use"
    assert foreign.verdict == "damaged" and [f.code for f in foreign.evaluation.findings] == ["stack-mismatch"]
    assert pending_one.verdict == "integral" and pending_one.evaluation.pending_operations == ("creating",)


def test_a_vanished_version_is_missing_not_an_error(store):
    store.put(KEY, state(1))
    (c,) = list_candidates(store, PROJECT, STACK).candidates
    gone = replace(c, version_id="no-such-version-id")
    assert CandidateEvaluator(store, EXPECTED).evaluate(gone).verdict == "missing"


def test_an_intact_ledger_places_candidates_without_downloads(aws, bucket):
    """The design of the performance target: many versions, an intact ledger recording each one's
    version id, and a verified choice with a single download."""
    store = CountingStore(aws.client("s3"), bucket)
    refs = []
    for serial in range(1, 61):
        body = state(serial)
        vid = store.put(KEY, body)
        refs.append(LedgerRef(serial, hashlib.sha256(body).hexdigest(), vid))
        if serial % 10 == 0:
            store.put(KEY, state(serial)[:50] + b"mid-update")  # unledgered writes in between
    cset = list_candidates(store, PROJECT, STACK)
    placed = match_ledger(cset.candidates, refs)
    assert store.gets == []
    assert len(placed) == 60 and {m.by for m in placed.values()} == {"version_id"}
    head = max(refs, key=lambda r: r.serial)
    chosen = next(c for c in cset.candidates if placed.get(c.ident) and placed[c.ident].serial == head.serial)
    ev = CandidateEvaluator(store, EXPECTED)
    verified = ev.evaluate(chosen)
    assert verified.verdict == "integral" and verified.sha256 == head.sha256
    assert ev.downloads == 1 <= 5


def test_ledger_matching_by_sha256_and_etag(store):
    body = state(3)
    store.put(KEY, body)
    (c,) = list_candidates(store, PROJECT, STACK).candidates
    sha = hashlib.sha256(body).hexdigest()
    by_etag = match_ledger([c], [LedgerRef(3, sha, None, etag=c.etag, size=c.size)])
    assert by_etag[c.ident].by == "etag"
    judged = CandidateEvaluator(store, EXPECTED).evaluate(c)
    assert match_ledger([judged], [LedgerRef(3, sha)])[c.ident].by == "sha256"
    assert match_ledger([c], [LedgerRef(4, "0" * 64, "other")]) == {}


def test_checkpoints_written_by_the_in_memory_engine(store):
    engine = InMemoryEngine(STACK, store=store, clock=lambda: time.time())
    outputs = {"groundctl_lineage": "lin-engine"}
    engine.declare(PROJECT, [FakeResource("aws:ec2/vpc:Vpc", "vpc", {"cidr": "10.0.0.0/16"}, id="vpc-1")], outputs)
    engine.up(PROJECT)
    engine.declare(PROJECT, [FakeResource("aws:ec2/vpc:Vpc", "vpc", {"cidr": "10.1.0.0/16"}, id="vpc-1")], outputs)
    engine.up(PROJECT)
    cset = list_candidates(store, PROJECT, STACK)
    assert {c.source for c in cset.candidates} >= {"current", "version", "bak", "history"}
    ev = CandidateEvaluator(store, EXPECTED)
    judged = list(ev.newest_first(cset.candidates))
    assert [(c.verdict, c.lineage) for c in judged] == [("integral", "lin-engine")] * len(judged)
    assert ev.downloads == len({c.sha256 for c in judged}) < len(judged)  # identical copies shared
    assert json.dumps([c.to_dict() for c in judged])


def test_checkpoints_retained_by_pulumi_are_candidates(store):
    # PULUMI_DIY_BACKEND_RETAIN_CHECKPOINTS: after each save Pulumi writes the same bytes to
    # `<stack file>.<UnixNano>` (pkg/backend/diy/state.go), next to the stack file, for plain and compressed.
    store.put(KEY, state(3))
    store.put(f"{KEY}.1764633600000000001", state(1))
    store.put(f"{layout.stack_key(PROJECT, STACK, '.json.gz')}.1764633600000000002", gzip.compress(state(2)))
    store.put(f"{KEY}.bak", state(2))
    store.put(f"{KEY}.notnanos", state(9))                                  # not Pulumi's: not a candidate
    store.put(f"{layout.stack_key(PROJECT, STACK + 'x')}.1764633600000000003", state(9))  # another stack

    cset = list_candidates(store, PROJECT, STACK)
    retained = [c for c in cset.candidates if c.source == "retained"]
    assert [c.key for c in retained] == [f"{KEY}.gz.1764633600000000002", f"{KEY}.1764633600000000001"]
    assert {c.source for c in cset.candidates} == {"current", "bak", "retained"}
    assert store.gets == []
    ev = CandidateEvaluator(store, EXPECTED)
    assert [ev.evaluate(c).verdict for c in retained] == ["integral", "integral"]
