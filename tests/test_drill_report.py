"""Verdicts (pure), the Markdown report, redaction, the written files, and history with its trend."""

from __future__ import annotations

import json
from dataclasses import replace
import xml.etree.ElementTree as ET

from bootstrap.records import layout
from bootstrap.aws.objectstore import ObjectStore
from recovery.drills import phases as dp
from recovery.drills.phases import PhaseResult, decide
from recovery.drills.report import (DrillReport, load_history, render_markdown, summarize_history, trend,
                                   what_to_look_at, write_report)

T0 = 1_796_000_000.0
CANARY = "canary-secret-5e7a91d3"


def ph(name, start, secs, status="achieved", reason="Ok", message="ok", **kw):
    return PhaseResult(name, status, reason, message, status not in ("not-attempted", "skipped"),
                       started_at=T0 + start, ended_at=T0 + start + secs, **kw)


def rebuild(times=(5, 5, 60, 600, 900, 120, 300, 2)):
    start, out = 0, []
    for name, secs in zip(dp.REBUILD, times):
        out.append(ph(name, start, secs))
        start += secs
    return tuple(out)


def test_verdict_passes_only_when_every_phase_achieved_within_the_rto():
    v = decide(rebuild(), dp.REBUILD_RECOVERY, 30)
    assert (v.outcome, v.reason, v.recovery_seconds, v.within_rto) == ("passed", "WithinRTO", 1322, True)
    slow = decide(rebuild((5, 5, 60, 600, 1700, 120, 300, 2)), dp.REBUILD_RECOVERY, 30)
    assert (slow.outcome, slow.reason, slow.within_rto) == ("failed", "OverRTO", False)
    assert "2122 s" in slow.message and "30 min" in slow.message


def test_a_failed_phase_decides_and_a_skipped_one_makes_it_unverified():
    phases = list(rebuild())
    phases[6] = ph("flux-ready", 1570, 300, "failed", "ReadyTimeout", "not Ready after 300 s")
    v = decide(tuple(phases), dp.REBUILD_RECOVERY, 30)
    assert (v.outcome, v.failed_phase, v.reason) == ("failed", "flux-ready", "ReadyTimeout")
    phases = list(rebuild())
    for i in (2, 5, 6, 7):
        phases[i] = dp.skipped(dp.PhasePlan(dp.REBUILD[i], "", "no Kubernetes API here"), "NoKubernetesApi")
    v = decide(tuple(phases), dp.REBUILD_RECOVERY, 30)
    assert v.outcome == "unverified" and v.reason == "NotFullyVerified" and "no Kubernetes API here" in v.message
    assert v.recovery_seconds == 900  # only recreate-cluster was timed
    refused = (ph("preflight", 0, 1, "refused", "ProductionRefused", "production"),) + tuple(
        dp.not_attempted(n) for n in dp.REBUILD[1:])
    assert decide(refused, dp.REBUILD_RECOVERY, 30).outcome == "refused"
    assert decide(refused, dp.REBUILD_RECOVERY, 30, dry_run=True).outcome == "dry-run"


def report(phases, *, kind="rebuild-cluster", **kw):
    verdict = decide(phases, dp.REBUILD_RECOVERY if kind == "rebuild-cluster" else dp.STATE_LOSS_RECOVERY, 30)
    return DrillReport("20261202T110000Z-x", kind, "dev", T0, T0 + 2000, 30, phases, verdict,
                       left_half_done=tuple(dp.left_half_done(phases, "dev")), **kw)


def test_markdown_names_the_failed_phase_the_next_step_and_what_was_left_down():
    phases = list(rebuild())
    phases[4] = ph("recreate-cluster", 670, 100, "failed", "UpFailed", "EKS said no",
                   next_step=dp.next_step("recreate-cluster", "dev"))
    phases[5:] = [dp.not_attempted(n) for n in dp.REBUILD[5:]]
    r = report(tuple(phases), runs=("run-1",))
    look = what_to_look_at(r)
    assert look[0].startswith("The **recreate-cluster** phase failed (UpFailed): EKS said no")
    assert "groundctl up dev --layers cluster,flux --yes" in look[1]
    assert any("LEFT CHANGED: the cluster layer of dev" in item for item in look)
    assert any("LEFT CHANGED: the flux layer of dev" in item for item in look)
    md = render_markdown(r, "x.svg")
    assert "**Verdict: FAILED** (UpFailed)" in md and "![timeline" in md and "## What to look at" in md
    assert "| recreate-cluster | failed | yes | no | UpFailed | 100.0 s | EKS said no |" in md
    assert ".groundctl/runs/dev/run-1.json" in md


def test_written_files_and_bucket_record_hold_no_secret(tmp_path, aws, bucket):
    store = ObjectStore(aws.client("s3"), bucket)
    phases = rebuild()
    r = report(phases, baseline={"cluster_outputs": {"cluster_name": "c", "note": f"leaked {CANARY}"}})
    written = write_report(r, store=store, out_dir=tmp_path, secret_values=[CANARY])
    assert written.bucket_key == layout.drill_key("dev", f"{r.drill_id}--passed-1322s")  # the verdict in the name
    assert sorted(p.rsplit("/", 1)[-1] for p in written.files) == sorted(
        f"{r.drill_id}.{ext}" for ext in ("svg", "md", "json"))
    for path in written.files:
        assert CANARY not in open(path).read()
    stored = store.get(written.bucket_key).body.decode()
    assert CANARY not in stored and json.loads(stored)["verdict"]["outcome"] == "passed"
    ET.parse(tmp_path / f"{r.drill_id}.svg")  # valid XML
    # The rendered report is kept in the bucket too (a scheduled drill's pod loses its files), as written locally.
    assert written.bucket_reports == tuple(layout.drill_report_key("dev", r.drill_id, ext) for ext in ("md", "svg"))
    for key in written.bucket_reports:
        body = store.get(key).body.decode()
        assert CANARY not in body
        assert body == (tmp_path / f"{r.drill_id}.{key.rsplit('.', 1)[1]}").read_text()


def test_a_progress_checkpoint_keeps_no_rendered_report_and_the_reports_stay_out_of_the_status_listing(aws, bucket):
    from recovery.drills.report import RUNNING
    from recovery.evidence.reading import scan

    store = ObjectStore(aws.client("s3"), bucket)
    r = report(rebuild())
    running = replace(r, verdict=replace(r.verdict, outcome=RUNNING))
    assert write_report(running, store=store).bucket_reports == ()
    assert [k for k, _, _ in store.keys(".groundctl/reports/")] == []
    written = write_report(r, store=store)
    assert len(written.bucket_reports) == 2
    # Fleet status's listing reads from the drift records to locks/ and stops there: reports sort after it, so
    # they never cost it a page, and what it finds is the same with or without them.
    assert all(key > ".groundctl/locks/~" for key in written.bucket_reports)
    found = scan(store, "dev")
    for key in written.bucket_reports:
        store.delete(key)
    assert scan(store, "dev") == found


def test_a_secret_that_rendering_escapes_is_still_masked(tmp_path):
    # A kubeconfig has newlines; Markdown cells and JSON blocks escape them, SVG escapes `&` and `<`.
    secret = 'line one\nline|two & <three> "canary-escaped-2c9f41"'
    phases = list(rebuild())
    phases[4] = ph("recreate-cluster", 670, 100, "failed", "UpFailed", f"EKS said {secret}")
    r = report(tuple(phases), baseline={"cluster_outputs": {"kubeconfig_copy": secret}})
    written = write_report(r, out_dir=tmp_path, secret_values=[secret])
    assert len(written.files) == 3
    for path in written.files:
        assert "canary-escaped" not in open(path).read()
    assert "[redacted]" in (tmp_path / f"{r.drill_id}.md").read_text()


def test_trend_compares_the_latest_with_the_runs_before():
    assert trend([]) == trend([100.0]) == "not enough data"
    assert trend([100, 100, 80]) == "improving"
    assert trend([100, 100, 130]) == "worsening"
    assert trend([100, 104, 98]) == "steady"


def test_history_lists_drills_oldest_first_with_a_trend_per_kind(aws, bucket):
    store = ObjectStore(aws.client("s3"), bucket)
    for i, secs in enumerate((900, 1000, 700)):
        phases = rebuild((5, 5, 60, 600, secs, 120, 300, 2))
        r = report(phases)
        r = DrillReport(f"2026120{i}T000000Z-rebuild-cluster-aaaaa{i}", r.kind, "dev", T0 + i * 86400,
                        T0 + i * 86400 + 3000, 30, phases, r.verdict)
        write_report(r, store=store)
    dry = DrillReport("20261209T000000Z-state-loss-bbbbbb", "state-loss", "dev", T0 + 9 * 86400, T0 + 9 * 86400 + 5,
                      30, (), decide((), dp.STATE_LOSS_RECOVERY, 30, dry_run=True), {"dry_run": True}, layer="network")
    write_report(dry, store=store)
    store.put(layout.drill_key("dev", "garbage"), b"not json")
    records, unreadable = load_history(store, "dev")
    assert unreadable == [layout.drill_key("dev", "garbage")]
    summary = summarize_history(records, last_n=5)
    assert [row["kind"] for row in summary["drills"]] == ["rebuild-cluster"] * 3 + ["state-loss"]
    t = summary["trends"]["rebuild-cluster"]
    assert t["recovery_seconds"] == [1322.0, 1422.0, 1122.0] and t["trend"] == "improving" and t["passed"] == 3
    assert summary["trends"]["state-loss"]["trend"] == "not enough data"
