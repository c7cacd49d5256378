"""What one guided run carries from phase to phase."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Optional

from bootstrap.records import ledger as led
from recovery.choice import choose as ch
from recovery.guide.model import GuideOptions, GuideServices
from recovery.choice.evaluator import CandidateEvaluator


class Run:
    """The state carried from phase to phase. Only `run_guide` makes one."""

    def __init__(self, opts: GuideOptions, svc: GuideServices):
        self.o, self.s = opts, svc
        self.evaluator = CandidateEvaluator(svc.store, expected_stack=opts.expected_stack)
        # Assess, Candidates and Lineage only read (recovery.guide.newest): each listing is taken once for both
        # the candidates and the tamper check, and the ledger is read while the current state is evaluated.
        self.background = ThreadPoolExecutor(max_workers=3, thread_name_prefix="ledger-read")
        self.ledger_reads = None
        self.index = None                       # the ledger index's (entries, problem), read once
        self.pages = None                       # recovery.choice.versions.VersionPages of the stack object
        self.listings: tuple = ((), ())         # the history and backups version listings
        self.cset = None
        self.ledger: Optional[led.LedgerRead] = None
        self.evidence: Optional[ch.Evidence] = None
        self.choice: Optional[ch.Choice] = None
        self.chosen_candidate = None
        self.nothing_to_restore = False
        self.import_plan: Optional[dict] = None
        self.classification = None              # recovery.survivors.state_vs_live.Classification of the chosen state
        self.covered: frozenset[str] = frozenset()  # the types inventory looked for
        self.planned_urns: frozenset[str] = frozenset()  # resources of the chosen state, and those the import adds
        self.never_made: frozenset[str] = frozenset()    # pending creates cleared as having made nothing
        self.other_pending: tuple[tuple[str, str], ...] = ()  # pending operations that are not creates

    def close(self) -> None:
        self.background.shutdown(wait=True, cancel_futures=True)
