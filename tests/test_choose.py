"""The choice of a state version, as a pure decision over candidates and ledger evidence."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from recovery.choice import choose as ch
from recovery.choice.choose_inputs import evidence_from, options_from
from recovery.choice.recovery_point import recovery_point

T0 = datetime(2026, 12, 1, tzinfo=timezone.utc)
L = "lineage-a"


def opt(n, *, serial=None, after=None, verdict="integral", lineage=L, current=False, findings=0):
    return ch.Option(ident=("k", f"v{n}"), source="current" if current else "version", when=T0 + timedelta(minutes=n),
                     verdict=verdict, lineage=lineage, sha256=f"sha{n}", serial=serial, after_serial=after,
                     resources=3, findings=findings, is_current=current)


def ledger(head=7, forks=()):
    return ch.Evidence("ledger", lineage=L, head_serial=head, serials=tuple(range(1, head + 1)), forks=forks)


def test_head_is_chosen_when_current_is_corrupt():
    opts = [opt(8, after=7, verdict="unreadable", current=True), opt(7, serial=7), opt(6, serial=6)]
    c = ch.decide(opts, ledger())
    assert c.allowed and c.chosen.serial == 7 and not c.serials_lost
    assert [o.ident[1] for o in c.newer] == ["v8"]
    assert c.skipped[0][1] == "unreadable"


def test_unevaluated_candidate_is_asked_for_newest_first():
    opts = [opt(7, serial=7, verdict=None), opt(8, after=7, verdict=None, current=True)]
    need = ch.decide(opts, ledger())
    assert need == ch.Need(("k", "v8"))


def test_rollback_refused_with_both_serials_named_and_lifted_by_its_flag():
    opts = [opt(7, serial=7, verdict="missing"), opt(4, serial=4)]
    c = ch.decide(opts, ledger())
    assert not c.allowed and c.chosen is None
    (r,) = c.refusals
    assert r.code == "rollback" and r.flag == "--allow-rollback" and "serial 4 over newer serial 7" in r.message
    c2 = ch.decide(opts, ledger(), ch.Flags(allow_rollback=True))
    assert c2.allowed and c2.chosen.serial == 4 and c2.serials_lost == (5, 6, 7)
    assert c2.overridden[0].code == "rollback"


def test_foreign_lineage_refused_naming_both_and_lifted_by_its_flag():
    opts = [opt(8, after=7, lineage="lineage-b", current=True)]
    c = ch.decide(opts, ledger())
    (r,) = c.refusals
    assert r.code == "foreign-lineage" and r.flag == "--allow-foreign-lineage"
    assert "lineage-b over the stack's lineage lineage-a" in r.message
    c2 = ch.decide(opts, ledger(), ch.Flags(allow_foreign_lineage=True))
    assert c2.allowed and c2.chosen.lineage == "lineage-b"


def test_foreign_newer_state_is_passed_over_for_the_right_lineage():
    opts = [opt(9, after=7, lineage="lineage-b", current=True), opt(7, serial=7)]
    c = ch.decide(opts, ledger())
    assert c.allowed and c.chosen.serial == 7
    assert "lineage lineage-b" in c.skipped[0][1]


def test_damaged_only_refused_then_allowed_by_its_flag():
    opts = [opt(8, after=7, verdict="damaged", findings=2, current=True)]
    c = ch.decide(opts, ledger())
    (r,) = c.refusals
    assert r.code == "damaged" and r.flag == "--allow-damaged" and "breaks 2" in r.message
    c2 = ch.decide(opts, ledger(), ch.Flags(allow_damaged=True))
    assert c2.allowed and c2.chosen.verdict == "damaged"


def test_rollback_or_newer_damaged_are_alternatives():
    opts = [opt(7, serial=7, verdict="damaged", findings=1), opt(5, serial=5)]
    c = ch.decide(opts, ledger())
    assert [r.code for r in c.refusals] == ["rollback"]
    assert any("--allow-damaged would restore" in n for n in c.notes)
    c2 = ch.decide(opts, ledger(), ch.Flags(allow_damaged=True))
    assert c2.allowed and c2.chosen.serial == 7


def test_fork_at_or_after_the_choice_refuses_without_a_flag():
    fork = ch.Fork(7, "", "", "serial 7 was derived from serial 5's state.")
    c = ch.decide([opt(7, serial=7)], ledger(forks=(fork,)))
    (r,) = c.refusals
    assert r.code == "fork" and r.flag is None and "derived from serial 5" in r.message
    old = ch.Fork(3, "", "", "old fork")
    c2 = ch.decide([opt(7, serial=7)], ledger(forks=(old,)))
    assert c2.allowed and any("older fork at serial 3" in n for n in c2.notes)


def test_weaker_evidence_takes_lineage_from_the_newest_integral_and_orders_by_time():
    ev = evidence_from([], missing=True)
    assert ev.strength == "weaker" and "no ledger" in ev.notes[0]
    opts = [opt(1), opt(3, verdict="unreadable", current=True), opt(2)]
    c = ch.decide(opts, ev)
    assert c.allowed and c.chosen.ident == ("k", "v2") and not c.serials_lost
    assert any("no ledger to confirm" in n for n in c.notes)


def test_nothing_readable_is_a_refusal_without_a_flag():
    c = ch.decide([opt(1, verdict="unreadable")], ledger())
    assert [(r.code, r.flag) for r in c.refusals] == [("no-candidate", None)]


def test_recovery_point_lists_lost_resources_and_serials():
    c = ch.decide([opt(7, serial=7, verdict="missing"), opt(5, serial=5)], ledger(), ch.Flags(allow_rollback=True))
    point = recovery_point(c, ["a", "b"], None, ["a", "b", "c"])
    assert point.serials_lost == (6, 7) and point.resources_lost == ("c",) and not point.loses_nothing


class _Rec:
    def __init__(self, serial, sha, vid, minute):
        self.serial, self.sha256, self.version_id, self.lineage, self.resources = serial, sha, vid, L, 3
        self.state_last_modified = (T0 + timedelta(minutes=minute)).isoformat()
        self.at = self.state_last_modified


class _Cand:
    def __init__(self, vid, minute, source="version", evaluation=None, etag=None, size=10):
        self.key, self.version_id, self.source, self.evaluation = "k", vid, source, evaluation
        self.etag, self.size = f'"{etag or vid}"', size
        self.last_modified = T0 + timedelta(minutes=minute, seconds=1)

    @property
    def ident(self):
        return (self.key, self.version_id)


def test_options_from_places_by_version_id_and_by_time():
    recs = [_Rec(1, "s1", "v1", 1), _Rec(2, "s2", "v2", 2)]
    ev = evidence_from(recs)
    assert ev.strength == "ledger" and ev.head_serial == 2
    opts = options_from([_Cand("v3", 3, "current"), _Cand("v2", 2), _Cand("vx", 1)], recs, ev)
    assert [(o.serial, o.after_serial) for o in opts] == [(None, 2), (2, None), (None, 1)]


def test_copies_with_a_recorded_versions_etag_take_its_serial_without_a_download():
    recs = [_Rec(1, "s1", "v1", 1), _Rec(2, "s2", "v2", 2)]
    hist = _Cand("h1", 5, "history", etag="v1")
    hist.key = "history-key"
    opts = options_from([_Cand("v2", 2), _Cand("v1", 1), hist], recs, evidence_from(recs))
    assert opts[2].serial == 1 and opts[2].verdict is None


def test_a_bak_written_in_the_same_second_as_a_recorded_version_is_placed_before_it():
    # Pulumi copies the checkpoint to .bak and then writes the new one, usually within one second, and
    # S3's LastModified has one-second resolution: the .bak holds the older state (found on the real engine).
    recs = [_Rec(1, "s1", "v1", 1), _Rec(2, "s2", "v2", 2)]
    bak = _Cand("b1", 2, "bak", evaluation=_Eval("s-mid"))
    bak.key = "k.bak"
    opts = options_from([_Cand("v2", 2, evaluation=_Eval("s2")), bak], recs, evidence_from(recs))
    assert [(o.serial, o.after_serial) for o in opts] == [(2, None), (None, 1)]
    assert ch.ordered(opts)[0].serial == 2


class _Eval:
    def __init__(self, sha):
        self.sha256, self.verdict, self.lineage, self.resource_count = sha, "integral", L, 3
        self.findings, self.pending_operations, self.foreign = (), (), ()


WEAKER = ch.Evidence("weaker", notes=("there is no ledger for this stack",))


def test_a_state_of_another_stack_is_never_chosen_without_its_flag_ledger_or_not():
    other = ("prod::billing",)
    for evidence in (WEAKER, ledger()):
        theirs = ch.Option(ident=("k", "v9"), source="current", when=T0 + timedelta(minutes=9), verdict="integral",
                           lineage="lineage-b", sha256="sha9", resources=4, is_current=True, foreign=other,
                           after_serial=7 if evidence.strength == "ledger" else None)
        mine = opt(7, serial=7 if evidence.strength == "ledger" else None)
        c = ch.decide([theirs, mine], evidence)
        # Skipped, and without a ledger it does not get to name the lineage either: this stack's own is chosen.
        assert c.allowed and c.chosen.ident == ("k", "v7")
        assert any("another stack (prod::billing)" in why for _o, why in c.skipped)
        alone = ch.decide([theirs], evidence)
        assert not alone.allowed and [r.code for r in alone.refusals] == ["foreign-stack"]
        assert alone.refusals[0].flag == "--allow-foreign-stack" and "stack prod of project billing" in \
            alone.refusals[0].message
        lifted = ch.decide([theirs], evidence, ch.Flags(allow_foreign_stack=True))
        if evidence.strength == "ledger":  # its own lineage is another one as well: that has its own flag
            assert [r.code for r in lifted.refusals] == ["foreign-lineage"]
            lifted = ch.decide([theirs], evidence, ch.Flags(allow_foreign_stack=True, allow_foreign_lineage=True))
        assert lifted.chosen is theirs and "foreign-stack" in [r.code for r in lifted.overridden]


def test_a_copy_identical_to_the_current_state_is_the_current_state():
    current = opt(5, current=True)
    backup = ch.Option(ident=("backups/k.1", None), source="backup", when=T0 + timedelta(minutes=6),
                       verdict="integral", lineage=L, sha256=current.sha256, resources=3)
    c = ch.decide([backup, current], WEAKER)
    assert c.chosen is current and c.already_current
    assert any("same bytes as the current state" in n for n in c.notes)
    # Not evaluated yet: the decision asks for the current state before it settles on the copy.
    need = ch.decide([backup, ch.Option(ident=current.ident, source="current", when=current.when,
                                        is_current=True)], WEAKER)
    assert need == ch.Need(current.ident)
