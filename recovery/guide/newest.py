"""How the read phases read the bucket: from the newest end (`recovery.choice.window`), and the whole history
only when the choice needs it.

Assess starts the reads: the ledger's index (one GET), a first page of the stack object's newest versions, the
history and backups listings; from the index and that page the window start, then the ledger from there on, in
the background while Assess evaluates the current state. Lineage/serial judges what was read: a window that
shows anything at all (a problem, a broken chain, a tamper finding, a record naming a version not listed) is
read whole. Choose asks the same of the choice (`window.proven`). Reading whole continues the stack object's
listing (no page of it is listed twice) and reads the ledger as `read_ledger` does. A bucket without an index (an earlier version's) is read whole from the start.
"""

from __future__ import annotations

import dataclasses

from bootstrap.records import layout
from bootstrap.records import ledger as led
from bootstrap.records import ledger_index, ledger_window
from recovery.choice import window
from recovery.choice.choose_inputs import evidence_from
from recovery.choice.versions import VersionPages, candidates_from
from recovery.guide.run import Run
from recovery.lineage.tamper import tamper_findings


def start(run: Run) -> None:
    """Begin the reads; `run.cset` holds the candidates listed so far, `run.ledger_reads` the ledger read."""
    o, store, bg = run.o, run.s.store, run.background
    p, s = o.project, o.environment
    index = bg.submit(ledger_index.get_index, store, p, s)
    history = bg.submit(lambda: list(store.versions(layout.history_prefix(p, s))))
    backups = bg.submit(lambda: list(store.versions(layout.backups_prefix(p, s))))
    pages = run.pages = VersionPages(store, layout.stack_key(p, s))
    pages.more(window.FIRST_PAGE)
    entries, problem = run.index = index.result()
    records = ledger_window.index_records(p, s, entries) if entries else {}
    first = window.window_start(records, pages.listed(), pages.partial_key) if records else 1
    while records and first > max(records) and not pages.complete:  # the head's version is older still
        pages.more()
        first = window.window_start(records, pages.listed(), pages.partial_key)
    if first > 1:
        run.ledger_reads = bg.submit(lambda: ledger_window.read_window(store, p, s, entries, records, first)
                                     or led.read_ledger(store, p, s, (entries, problem)))
        pages.after_partial()
    else:
        run.ledger_reads = bg.submit(led.read_ledger, store, p, s, (entries, problem))
        pages.rest()
    run.listings = (history.result(), backups.result())
    run.cset = candidates_from(p, s, pages.listed(), *run.listings)


def read_whole(run: Run) -> led.LedgerRead:
    """The whole ledger and every candidate: the listings begun are completed, the ledger read as before."""
    o = run.o
    run.pages.rest()
    run.cset = candidates_from(o.project, o.environment, run.pages.listed(), *run.listings)
    return led.read_ledger(run.s.store, o.project, o.environment, run.index)


def settle(run: Run, ledger: led.LedgerRead) -> tuple[led.ChainVerdict, list]:
    """Judge the ledger read (a window that shows anything is read whole first); set `run.ledger` and
    `run.evidence`. Returns the chain's verdict and the tamper findings."""
    o = run.o
    if ledger.window_start > 1:
        chain = led.verify_chain(ledger.records)
        tampered = tamper_findings(ledger.records, run.pages.listed(), ledger.object_versions)
        window_records = [r for r in ledger.records if r.serial >= ledger.window_start]
        if ledger.problems or not chain.ok or tampered or not window.covers(window_records, run.pages.listed(),
                                                                            run.pages.partial_key):
            ledger = read_whole(run)
    if ledger.window_start == 1:
        if not run.pages.complete:  # an index that could not stand for the records below: all is read
            run.pages.rest()
            run.cset = candidates_from(o.project, o.environment, run.pages.listed(), *run.listings)
        chain = led.verify_chain(ledger.records)
        tampered = tamper_findings(ledger.records, run.pages.listed(), ledger.object_versions)
    run.ledger = ledger
    # A tampered ledger is damaged evidence: the choice falls back to integrity and S3's own time order,
    # and is refused outright unless the operator accepts that with --allow-tampered-ledger.
    run.evidence = evidence_from(ledger.records, chain.findings, (*ledger.problems, *tampered), ledger.missing)
    if tampered:
        run.evidence = dataclasses.replace(run.evidence, tampered=tuple(f.sentence for f in tampered))
    return chain, tampered
