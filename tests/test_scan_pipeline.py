"""Reading many versions quickly without reading anything twice: downloads ahead of the parser, a bounded
window, listings taken once per recovery, the ledger read beside the candidates (on the emulator)."""

from __future__ import annotations

import sys
import threading
import time
import uuid

import pytest

import recovery.choice.evaluator as evaluator
import tests.test_recovery_scenarios as sc
from bootstrap.aws.objectstore import ObjectStore
from bootstrap.records import layout
from recovery.choice.evaluator import CandidateEvaluator
from recovery.choice.versions import list_candidates
from tests.test_versions import EXPECTED, KEY, PROJECT, STACK, state


class WatchedStore(ObjectStore):
    """The real store, recording every GET, every listing prefix and the most GETs in flight at once."""

    def __init__(self, client, bucket, get_delay: float = 0.0):
        super().__init__(client, bucket)
        self.gets: list[tuple[str, str | None]] = []
        self.listed: list[str] = []  # the prefix of each version listing page
        self.pages: list[tuple] = []  # (prefix, marker) of each
        self.in_flight = self.most_in_flight = 0
        self._lock = threading.Lock()
        self.get_delay = get_delay

    def get(self, key, version_id=None):
        with self._lock:
            self.gets.append((key, version_id))
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            time.sleep(self.get_delay)  # a slow network, so that downloads overlap if they can
            return super().get(key, version_id)
        finally:
            with self._lock:
                self.in_flight -= 1

    def versions_page(self, prefix, max_keys=1000, marker=None):
        self.listed.append(prefix)
        self.pages.append((prefix, marker))
        return super().versions_page(prefix, max_keys, marker)


@pytest.fixture
def store(aws, bucket):
    return WatchedStore(aws.client("s3"), bucket, get_delay=0.05)


def seeded(store, n: int = 8) -> list:
    for i in range(n):
        store.put(KEY, state(i))
    store.put(KEY + ".bak", state(n - 1))   # the same bytes as the newest version
    store.put(KEY, state(n)[:120])           # a truncated write on top
    return list(list_candidates(store, PROJECT, STACK).candidates)


def test_prefetch_gives_the_lazy_verdicts_in_order_with_each_version_downloaded_once(store, aws, bucket):
    cands = seeded(store)
    lazy = [(c.ident, c.verdict, c.sha256) for c in
            CandidateEvaluator(ObjectStore(aws.client("s3"), bucket), EXPECTED).newest_first(cands)]
    ev = CandidateEvaluator(store, EXPECTED)
    ahead = [(c.ident, c.verdict, c.sha256) for c in ev.newest_first(cands, prefetch=4)]
    assert ahead == lazy
    assert len(store.gets) == len(set(store.gets)) == ev.downloads == len(cands) - 1  # the .bak shares by ETag
    assert store.most_in_flight > 1  # the downloads did overlap
    assert [c.verdict for c in ev.newest_first(cands, prefetch=4)][0] == "unreadable"
    assert len(store.gets) == len(cands) - 1  # asking again downloads nothing


def test_stopping_early_leaves_at_most_the_window_unused(store):
    cands = seeded(store)
    ev = CandidateEvaluator(store, EXPECTED)
    before = sys.getswitchinterval()
    scan = ev.newest_first(cands, prefetch=3)
    first, second = next(scan), next(scan)
    assert sys.getswitchinterval() == min(before, 0.001)  # while downloads run ahead (recovery/choice/evaluator.py)
    scan.close()
    assert sys.getswitchinterval() == before
    assert (first.verdict, second.verdict) == ("unreadable", "integral")
    assert 2 <= ev.downloads <= 2 + 3 and len(store.gets) == len(set(store.gets))


def test_large_states_are_downloaded_one_at_a_time(store, monkeypatch):
    cands = seeded(store)
    monkeypatch.setattr(evaluator, "PREFETCH_BYTES", min(c.size for c in cands if c.size > 200) // 2)
    judged = list(CandidateEvaluator(store, EXPECTED).newest_first(cands, prefetch=4))
    assert len(judged) == len(cands) and store.most_in_flight == 1


def test_a_version_gone_since_the_listing_is_missing_with_prefetch_too(store):
    cands = seeded(store, 3)
    gone = cands[1].__class__(**{**cands[1].__dict__, "version_id": "no-such-version"})
    (judged,) = CandidateEvaluator(store, EXPECTED).newest_first([gone], prefetch=2)
    assert judged.verdict == "missing"


def test_the_guide_lists_the_stack_once_and_still_checks_the_ledger(aws, bucket, monkeypatch):
    env = f"p{uuid.uuid4().hex[:8]}"
    monkeypatch.setattr(sc, "ENV", env)
    monkeypatch.setattr(sc, "KEY", layout.stack_key(sc.LAYER, env))
    store = WatchedStore(aws.client("s3"), bucket)
    engine = sc.history(store)
    store.put(sc.KEY, b'{"version": 3, "checkpoint": {')  # a truncated write
    store.listed.clear()
    t = sc.guide(store, aws, engine, dry_run=True)
    choose = sc.phase(t, "choose")
    assert choose.reason == "ChoseNewestIntegral" and choose.details["chosen"]["serial"] == 3
    assert store.listed.count(layout.stack_key(sc.LAYER, env)) == 1
    assert store.listed.count(layout.ledger_prefix(sc.LAYER, env)) == 1  # the tamper check's own listing
    assert len(set(store.pages)) == len(store.pages)  # no page listed twice
    assert sc.phase(t, "lineage").reason == "LedgerIntact"


def test_overlapping_scans_share_the_short_switch_interval_and_restore_python_s():
    from recovery.choice.evaluator import _quick_handoffs

    before = sys.getswitchinterval()
    _quick_handoffs.enter()
    _quick_handoffs.enter()  # two scans side by side
    assert sys.getswitchinterval() == min(before, 0.001)
    _quick_handoffs.leave()
    assert sys.getswitchinterval() == min(before, 0.001)
    _quick_handoffs.leave()
    assert sys.getswitchinterval() == before
