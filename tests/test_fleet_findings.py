"""Fleet status for triage: every finding's level comes from the rules table (and the README shows that
table), rows sort worst first with production first, freshness and per-kind drills are findings, the RTO
trend ignores noise and failed drills, `--fail-on` decides the exit code, an unreadable or stuck
environment is its own row, and a spec's `fleet.status_role_arn` is the role its bucket is read with."""

from __future__ import annotations

import copy
import json
import os
import re
import shlex
import subprocess
import sys
import time
import uuid
from datetime import datetime, timezone

import pytest
import yaml

from bootstrap.spec import parse_spec
from recovery.fleet.cadence import longest_gap_minutes
from bootstrap.records.liveness import BREAKABLE, GONE, STALE_TTLS, Place, lock_verdict
from recovery.fleet.findings import RULES, find, rto_trend
from recovery.fleet.next_steps import NEXT_STEPS, next_step
from recovery.evidence.reading import read_fleet
from recovery.fleet.status import fleet_report
from tests import docs
from tests.conftest import REPO
from tests.fleetseed import Seed, dump, seed_environment, spec_data

# -- pure ----------------------------------------------------------------------------------------------


def _readme_rules() -> list[tuple[str, ...]]:
    """The rows of docs/fleet.md's rules table: (rule, production, elsewhere, when, command, runbook)."""
    table = docs.section("fleet.md", "The rules table")
    rows = []
    for line in docs.table_after(table, "| rule | production | elsewhere | when | next step | runbook |"):
        rule, prod, other, when, command, runbook = [c.strip() for c in line.strip("|").split(" | ")]
        link = re.fullmatch(r"\[(.+)\]\(\.\./(runbooks/.+)\)", runbook)
        assert link and link[2].endswith(link[1]), line
        rows.append((rule.strip("`"), prod, other, when, command.strip("`"), link[2]))
    return rows


def test_the_readme_rules_table_is_the_codes_levels_and_next_steps():
    assert set(NEXT_STEPS) == set(RULES)
    code = [(rule, prod, other, when, *NEXT_STEPS[rule]) for rule, (prod, other, when) in RULES.items()]
    assert _readme_rules() == code


def _slug(heading: str) -> str:
    """GitHub's anchor for a Markdown heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _sample(rule: str, **facts) -> dict:
    return {"rule": rule, "level": "warning", "what": "x", "since": None} | facts


@pytest.mark.parametrize("rule", sorted(RULES))
def test_every_next_step_is_a_real_command_and_a_real_runbook_section(rule):
    from tests.test_runbooks import ROOT, check_command

    facts = {"drill-overdue": {"kind": "state-loss", "layer": "cluster"}, "drill-never": {"kind": "rebuild-cluster"},
             "record-unreadable": {"key": ".groundctl/drift/prod-ledger/x.json"},
             "rpo-exceeded": {"layer": "cluster"}, "rehearsal-failed": {"layer": "network"}}.get(rule, {})
    for production in (False, True):
        step = next_step(_sample(rule, **facts), environment="prod-ledger", production=production, bucket="acme-state")
        words = shlex.split(step["command"])
        if words[0] == "groundctl":
            assert check_command(ROOT, words[1:]) is None, step
        else:
            assert words[0] == "aws" and "acme-state" in step["command"], step
        assert "<" not in step["command"], step  # every blank filled
        path, _, anchor = step["runbook"].partition("#")
        text = (REPO / path).read_text()
        if anchor:
            assert anchor in {_slug(h) for h in re.findall(r"^#+ (.+)$", text, re.M)}, step


def test_a_next_step_fits_the_finding_and_quotes_what_came_from_the_bucket():
    def command(rule, production=False, **facts):
        return next_step(_sample(rule, **facts), environment="prod-identity", production=production,
                         bucket="acme-state")["command"]

    assert command("lock-stale") == "groundctl lock break prod-identity"
    assert command("drift") == "groundctl drift prod-identity"
    assert command("drill-failed", kind="rebuild-cluster") == "groundctl drill history prod-identity"
    assert command("drill-overdue", True, kind="rebuild-cluster") == \
        "groundctl drill rebuild-cluster prod-identity --i-mean-production --dry-run"
    assert command("drill-never", kind="state-loss", layer="network") == \
        "groundctl drill state-loss prod-identity --layer network --dry-run"
    hostile = ".groundctl/drills/prod-identity/x'; rm -rf ~; echo '$(id)`id`\n.json"
    words = shlex.split(command("record-unreadable", key=hostile))
    assert words == ["aws", "s3", "cp", f"s3://acme-state/{hostile}", "-"]  # one inert argument, run as shown


@pytest.mark.parametrize("ttls,rule,command", [
    (0.5, "lock-held", "groundctl lock status prod-ledger"),
    (2, "lock-unknown", "groundctl lock break prod-ledger --force"),
    (STALE_TTLS + 1, "lock-stale", "groundctl lock break prod-ledger")])
def test_the_lock_rules_follow_the_lock_verdict_from_where_fleet_status_runs(ttls, rule, command):
    """A holder on another host, judged as `lock status` judges it from here: alive within its TTL, unknown
    until STALE_TTLS TTLs (only --force breaks it), stale after; each verdict has its rule, and the rule's next
    step is the command that works on it."""
    ttl, since = 120, 1_800_000_000.0
    verdict, reason = lock_verdict(Place("runner-7", "boot-a", 4026531836), 4242, since, Place("fleet-0"), GONE,
                                   heartbeat_age=ttls * ttl, ttl=ttl)
    row = {"environment": "prod-ledger", "production": True, "bucket": "b", "problems": [],
           "lock": {"held": True, "stale": verdict in BREAKABLE, "verdict": verdict, "holder": "ci@runner-7 run r",
                    "reason": reason, "heartbeat_at": "2026-01-05T02:00:00Z"}}
    (found,) = [f for f in find(row) if f["rule"].startswith("lock-")]
    assert found["rule"] == rule and found["next"]["command"] == command, (verdict, found)
    assert shlex.split(command)[1:3] != ["lock", "break"] or "--force" in command or verdict in BREAKABLE
    if rule != "lock-held":
        assert f"{STALE_TTLS} TTLs" in RULES[rule][2] and "past its TTL" not in RULES["lock-stale"][2]


def _history(*verdicts: str) -> list[dict]:
    return [{"verdict": v, "started_at": f"2026-01-{i + 1:02d}T00:00:00Z"} for i, v in enumerate(verdicts)]


def test_since_is_the_first_record_of_the_run_that_shows_the_condition():
    from recovery.fleet.status import _streak

    assert _streak(_history("failed", "passed", "failed", "failed")) == {"records": 2, "at": "2026-01-03T00:00:00Z",
                                                                          "exact": True}
    assert _streak(_history("passed", "refused", "unverified")) == {"records": 2, "at": "2026-01-02T00:00:00Z",
                                                                     "exact": True}
    assert _streak(_history("failed", "passed")) is None and _streak([]) is None
    # A run that reaches back past every drill listed is dated "at least".
    assert _streak(_history(*["failed"] * 50))["exact"] is False and _streak(_history(*["failed"] * 3))["exact"]

    row = {"environment": "prod-ledger", "production": True, "bucket": "b", "problems": [],
           "freshness": {"drift_max_age_seconds": 7200, "drift_schedule": "17 * * * *", "drill_max_age_seconds": {}},
           "drift": {"result": "drift", "at": "2026-01-05T10:00:00Z", "age_seconds": 30.0,
                     "drifted_layers": ["network"],
                     "streak": {"records": 12, "at": "2026-01-05T00:00:00Z", "exact": True}},
           "drills": {"per_kind": {"rebuild-cluster": {
               "last": {"verdict": "failed", "reason": "Timeout", "started_at": "2026-01-04T00:00:00Z",
                        "age_seconds": 3600.0},
               "streak": {"records": 2, "at": "2026-01-03T00:00:00Z", "exact": False}, "trend": {}}}},
           "lock": {"held": True, "stale": True, "holder": "ci@runner run r", "reason": "heartbeat 3 h old",
                    "started_at": "2026-01-05T01:00:00Z", "heartbeat_at": "2026-01-05T02:00:00Z"}}
    found = {f["rule"]: f for f in find(row)}
    assert found["drift"]["since"] == "2026-01-05T00:00:00Z" and "12 checks in a row" in found["drift"]["what"]
    assert found["drill-failed"]["since"] == "2026-01-03T00:00:00Z" and found["drill-failed"]["since_exact"] is False
    assert "at least 2 drills in a row" in found["drill-failed"]["what"]
    assert found["lock-stale"]["since"] == "2026-01-05T02:00:00Z"  # its last heartbeat
    assert found["lock-stale"]["next"] == {"command": "groundctl lock break prod-ledger",
                                           "runbook": "runbooks/break-stale-lock.md"}
    row["drift"] |= {"result": "clean", "age_seconds": 4 * 3600.0, "streak": None}
    stale = next(f for f in find(row) if f["rule"] == "drift-stale")
    assert stale["since"] == "2026-01-05T12:00:00Z"  # the last check plus the two hours its schedule allows


def _rehearsals(*records: tuple[float, dict], complete: bool = True) -> dict:
    """What `reading.rehearsals` hands on, from records named as `state rehearse --record` names them:
    (start, {layer: (outcome, measured RPO)}), newest first."""
    from recovery.evidence.rehearsal_record import parse_name, record_name

    out = []
    for i, (at, layers) in enumerate(records):
        rec = {"at": datetime.fromtimestamp(at, timezone.utc).isoformat().replace("+00:00", "Z"),
               "rehearsal_id": f"r{i}", "outcome": "failed" if not layers else "x",
               "layers": [{"layer": k, "outcome": o, "rpo_seconds": a} for k, (o, a) in layers.items()]}
        out.append(parse_name(record_name(rec) + ".json") | {"key": f"k{i}"})
    return {"records": out, "complete": complete,
            "reasons": {"k0": {"network": "wrong passphrase", "": "the CLI is missing"}, "k1": {"network": "same"}}}


@pytest.mark.parametrize("production, level", [(True, "critical"), (False, "warning")])
def test_the_last_proven_restore_per_layer_and_its_findings(production, level):
    from recovery.evidence.rehearsals import summarize_rehearsals

    now, hour, day = 1_800_000_000.0, 3600.0, 86400.0
    raw = _rehearsals(
        (now - hour, {"network": ("failed", None), "cluster": ("proven", 7200)}),
        (now - day, {"network": ("failed", 300), "cluster": ("drift", 3600)}),
        (now - 2 * day, {"network": ("proven", 600), "cluster": ("proven", 60)}),
        (now - 3 * day, {"flux": ("proven", 60)}))
    reh = summarize_rehearsals(raw, ["backend", "network", "cluster"], rpo_seconds=1800.0, schedule="5 3 * * *",
                               max_age_seconds=2 * day, now=now)
    assert list(reh["layers"]) == ["backend", "network", "cluster", "flux"]
    net, cluster = reh["layers"]["network"], reh["layers"]["cluster"]
    assert net["last"]["outcome"] == "failed" and net["last"]["reason"] == "wrong passphrase"
    assert net["last_proven"]["rpo_seconds"] == 600 and net["last_proven"]["age_seconds"] == 2 * day
    assert net["failed_run"] == {"records": 2, "at": raw["records"][1]["at"], "exact": True}
    assert cluster["last_proven"]["outcome"] == "proven" and cluster["last_proven"]["rpo_seconds"] == 7200
    assert cluster["over_rpo_run"]["records"] == 2  # 7200 s and 3600 s (drift is restorable too) > 30 min

    row = {"environment": "prod-ledger", "production": production, "bucket": "b", "problems": [],
           "freshness": {"drill_max_age_seconds": {}}, "drift": {"result": "clean", "at": None, "age_seconds": 1.0,
                                                                  "drifted_layers": []},
           "rehearsals": reh}
    found = [f for f in find(row) if f["rule"].startswith(("rehearsal", "rpo"))]
    by = {(f["rule"], f.get("layer")): f for f in found}
    assert set(by) == {("rehearsal-overdue", None), ("rehearsal-failed", "network"), ("rpo-exceeded", "cluster"),
                       ("rehearsal-overdue", "flux")}, sorted(by)
    assert {f["level"] for f in found} == {level}
    assert "of backend" in by["rehearsal-overdue", None]["what"] and by["rehearsal-overdue", None]["since"] is None
    failed = by["rehearsal-failed", "network"]
    assert "wrong passphrase" in failed["what"] and "2 rehearsals in a row" in failed["what"]
    assert failed["since"] == raw["records"][1]["at"] and failed["next"] == {
        "command": "groundctl state rehearse prod-ledger", "runbook": "runbooks/rehearsal-failed.md"}
    rpo = by["rpo-exceeded", "cluster"]
    assert "would lose the changes of the last 2.0 h, over the RPO of 30 min" in rpo["what"]
    assert rpo["since"] == raw["records"][1]["at"]
    assert rpo["next"]["command"] == "groundctl state versions prod-ledger cluster"
    assert by["rehearsal-overdue", "flux"]["since"] == "2027-01-14T08:00:00Z"  # 3 days ago, plus the 2 allowed
    assert by["rehearsal-overdue", "flux"]["next"]["command"] == "groundctl state rehearse prod-ledger --record"

    # A run that stopped before any verdict is the environment's finding, with its reason; rehearsed and fresh
    # within the RPO, nothing.
    stopped = summarize_rehearsals(_rehearsals((now - hour, {}), (now - day, {"network": ("proven", 60)})),
                                   ["network"], rpo_seconds=1800.0, schedule="5 3 * * *", max_age_seconds=2 * day,
                                   now=now)
    found = [f for f in find(row | {"rehearsals": stopped}) if f["rule"].startswith(("rehearsal", "rpo"))]
    assert [(f["rule"], f.get("layer")) for f in found] == [("rehearsal-failed", None)]
    assert "stopped before any verdict: the CLI is missing" in found[0]["what"]
    # An untouched layer's proven version is its newest: a restore loses nothing (0 s), however old it is.
    fine = summarize_rehearsals(_rehearsals((now - day, {"network": ("proven", 60), "cluster": ("proven", 0)})),
                                ["network", "cluster"], rpo_seconds=1800.0, schedule="5 3 * * *",
                                max_age_seconds=2 * day, now=now)
    assert fine["layers"]["cluster"]["last_proven"]["rpo_seconds"] == 0
    assert not [f for f in find(row | {"rehearsals": fine}) if f["rule"].startswith(("rehearsal", "rpo"))]


@pytest.mark.parametrize("schedule,gap", [("17 * * * *", 60), ("*/15 * * * *", 15), ("5 3 * * 6", 7 * 1440),
                                          ("0 9 * * 1-5", 3 * 1440), ("0 0 1 * *", 31 * 1440), ("0 0 * * MON", 7 * 1440)])
def test_the_longest_gap_of_a_schedule(schedule, gap):
    assert longest_gap_minutes(schedule) == gap


def test_the_trend_fires_on_a_real_slowdown_and_not_on_noise():
    rto = 1800.0
    assert rto_trend([600, 640, 580, 610, 590], rto)["trend"] == "steady"      # ±40 s: noise
    assert rto_trend([600, 600, 600, 600, 680], rto)["trend"] == "steady"      # under the 90 s floor (5 % of RTO)
    slow = rto_trend([600, 690, 780, 870, 960], rto)
    assert slow["trend"] == "slower" and slow["baseline"] == 735.0 and slow["threshold_seconds"] == 90  # 5 % of RTO
    assert rto_trend([600, 610, 960], rto)["trend"] == "not enough data"
    # A widely scattered history widens the threshold: one slow run inside its spread is not a trend.
    assert rto_trend([400, 900, 500, 800, 950], rto)["trend"] == "steady"


def test_a_drill_name_is_read_strictly():
    from recovery.drills.report import record_name
    from recovery.evidence.reading import parse_drill_name
    from tests.fleetseed import drill_report

    report = drill_report("dev", "state-loss", 3, rto_minutes=30, recovery=612.4)
    assert parse_drill_name(record_name(report)) == {"drill_id": report.drill_id, "kind": "state-loss",
                                                     "outcome": "passed", "recovery_seconds": 612.0,
                                                     "at": "2025-11-27T16:00:00Z"}  # its id's start time
    old = parse_drill_name("20261202T110000Z-rebuild-cluster-3f9a1c")  # written before names carried the verdict
    assert old["outcome"] is None and old["kind"] == "rebuild-cluster"
    for planted in ("20261202T110000Z-rebuild-cluster-3f9a1c--passed-1e400s", "20261202T110000Z-state-loss-1--won",
                    "20261202T110000Z-state-loss-1--passed-99999999999s", "x--passed-1s",
                    "20261202T110000Z-state-loss-1--passed-[/bold]s"):
        assert parse_drill_name(planted) is None, planted


def test_the_page_stays_small_at_200_environments():
    from recovery.fleet.html import render
    from tests.fleetseed import T0, drill_report

    specs, raws = {}, []
    for i in range(200):
        name = f"environment-{i:03d}"
        specs[name] = parse_spec(spec_data(name, f"{name}-state", "http://127.0.0.1:9", production=i % 4 == 0), name)
        drills = [drill_report(name, kind, k, rto_minutes=30, recovery=600 + 60 * k, fail=i % 3 == 0 and k == 9)
                  .to_dict() for k, kind in ((8, "rebuild-cluster"), (9, "state-loss"))]
        raws.append({"environment": name, "bucket": f"{name}-state", "problems": [],
                     "protection": {"bucket": f"{name}-state", "exists": True, "unreadable": [], "versioning": "Enabled",
                                    "noncurrent_days": 30, "replication": "not read"},
                     "drift": {"check_id": "c", "at": "2025-11-24T00:00:00Z", "drift": i % 5 == 0,
                               "drifted_layers": ["network"] if i % 5 == 0 else []},
                     "drill_count": 10, "drills": drills,
                     "drill_names": [{"drill_id": f"20251120T00000{k}Z-rebuild-cluster-00000{k}", "kind": "rebuild-cluster",
                                      "outcome": "passed", "recovery_seconds": 600.0} for k in range(4)],
                     "lock": {"held": False}, "ledger": {"network": {"serial": 12, "at": "2025-11-24T00:00:00Z"}}})
    report = fleet_report(raws, specs, T0 + 12 * 86400)
    page = render(report)
    assert all(r["findings"] for r in report["environments"])  # every row has something to say (stale, overdue…)
    assert page.count("<svg") == 400 and page.count("<details") == 200  # none is quiet here: every one is overdue
    # Every finding carries since when and its command (about 60 bytes), every row its next step and runbook:
    # 2.5 KiB per environment (bench/fleet_status.py's target; 300 KB before next steps were shown).
    assert len(page.encode()) < 200 * 2560, len(page.encode())


def test_the_page_is_about_a_kibibyte_per_environment_when_most_have_nothing_to_do():
    """1,000 environments, one in ten with something to act on: the others are a line each, with no details."""
    from datetime import datetime, timezone

    from recovery.fleet.html import render
    from tests.fleetseed import T0

    now = T0 + 12 * 86400

    def iso(ts):
        return datetime.fromtimestamp(ts, timezone.utc).isoformat().replace("+00:00", "Z")

    stamp = datetime.fromtimestamp(now - 86400, timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    specs, raws = {}, []
    for i in range(1000):
        name = f"environment-{i:04d}"
        specs[name] = parse_spec(spec_data(name, f"{name}-state", "http://127.0.0.1:9"), name)
        loud = i % 10 == 0
        raws.append({
            "environment": name, "bucket": f"{name}-state", "problems": [],
            "protection": {"bucket": f"{name}-state", "exists": True, "unreadable": [], "versioning": "Enabled",
                           "noncurrent_days": 30, "replication": "not read", "from": "summary", "age_seconds": 3600},
            "drift": {"check_id": "c", "at": iso(now - 1800), "drift": loud, "drifted_layers": ["network"] if loud else []},
            "drill_count": 2, "drills": [],
            "drill_names": [{"drill_id": f"{stamp}-{kind}-00000{k}", "kind": kind, "outcome": "passed",
                             "recovery_seconds": 600.0} for k, kind in enumerate(("rebuild-cluster", "state-loss"))],
            "lock": {"held": False}, "ledger": {"network": {"serial": 12, "at": iso(now - 86400)}},
            "rehearsals": {"complete": True, "reasons": {}, "records": [{
                "key": f"k{i}", "rehearsal_id": "r", "at": iso(now - 3600), "outcome": "proven",
                "layers": {"network": {"outcome": "proven", "rpo_seconds": 0}}}]}})
    report = fleet_report(raws, specs, now)
    assert sum(r["level"] in ("critical", "warning") for r in report["environments"]) == 100
    page = render(report)
    assert page.count("<details") == 100 + 1  # the loud ones' details, and the one collapsed quiet section
    assert 'title="settings as the last drift check read them, 60 min ago"' in page
    assert len(page.encode()) / 1000 < 1024, len(page.encode()) / 1000


# -- the seeded fleet, read from the emulator ------------------------------------------------------------

@pytest.fixture(scope="module")
def seeded(seeded_fleet):
    return copy.deepcopy(seeded_fleet)  # the session's seeded fleet (tests/conftest.py), which others read too


def test_each_seeded_environment_has_the_level_its_story_calls_for(seeded):
    report, expected = seeded
    got = {r["environment"]: r["level"] for r in report["environments"]}
    wrong = {name: (got[name], level) for name, level in expected.items() if got[name] != level}
    assert not wrong, {n: [f for f in r["findings"]] for r in report["environments"] for n in wrong
                       if r["environment"] == n}


def test_rows_sort_worst_first_production_first_and_the_counts_name_the_critical(seeded):
    report, expected = seeded
    rows = report["environments"]
    ranks = [("critical", "warning", "info", "ok").index(r["level"]) for r in rows]
    assert ranks == sorted(ranks)
    crit = [r for r in rows if r["level"] == "critical"]
    assert [r["production"] for r in crit] == sorted((r["production"] for r in crit), reverse=True)
    c = report["counts"]
    assert c["by_level"]["critical"] == sum(1 for v in expected.values() if v == "critical") == 9
    assert set(c["critical_environments"]) == {n for n, v in expected.items() if v == "critical"}
    assert c["needing_attention"] == 20


def test_what_the_issue_found_hidden_is_now_a_finding(seeded):
    rows = {r["environment"]: r for r in seeded[0]["environments"]}
    rules = {name: {f["rule"]: f for f in r["findings"]} for name, r in rows.items()}
    # A failed rebuild-cluster drill is not hidden by a newer passing state-loss drill.
    api = rows["stage-api"]["drills"]["per_kind"]
    assert api["rebuild-cluster"]["last"]["verdict"] == "failed" and api["state-loss"]["last"]["verdict"] == "passed"
    assert rules["stage-api"]["drill-failed"]["level"] == "critical"
    # A drill that failed early is a failure, never an "improving" recovery time.
    web = rows["stage-web"]["drills"]["per_kind"]["rebuild-cluster"]
    assert web["last"]["recovery_seconds"] is None and web["trend"]["trend"] != "faster"
    # A production drift check 3.5 days old, and a never-checked one, are findings.
    assert "drift-stale" in rules["prod-billing"] and "drift-never" in rules["prod-reports"]
    # Only the seeded slowdowns are "slower"; the noisy one is not.
    slower = {n for n, r in rules.items() if "rto-slower" in r}
    assert slower == {"prod-media", "dev-queue"}
    # No replica outside production is info, not a red bar.
    assert rules["dev-ok-00"]["protection-at-risk"]["level"] == "info"
    assert rules["prod-identity"]["lock-stale"]["level"] == "critical"
    # Since: the stale lock's last heartbeat by the bucket's clock (minutes ago), not its holder's own claim.
    assert rules["prod-identity"]["lock-stale"]["since_age_seconds"] < 3600
    assert rules["prod-ledger"]["drift"]["since"] < rows["prod-ledger"]["drift"]["at"]  # the first of three
    assert rules["prod-checkout"]["drill-failed"]["since"] < rows["prod-checkout"]["drills"]["per_kind"][
        "rebuild-cluster"]["last"]["started_at"]  # the first of two failed rebuilds
    for r in rows.values():
        assert all(f["next"]["command"] and f["next"]["runbook"] for f in r["findings"]), r["environment"]
    assert rows["dev-gone"]["findings"][0]["rule"] == "bucket-missing"


# -- the command: --fail-on both ways, unreadable and stuck environments -----------------------------------

def _fleet_dir(tmp_path, aws, endpoint, stories: dict[str, Seed]):
    s3 = aws.client("s3")
    envs = tmp_path / "environments"
    envs.mkdir(parents=True)
    now = time.time()
    for name, seed in stories.items():
        bucket = f"fo-{uuid.uuid4().hex[:16]}"
        seed_environment(s3, name, bucket, seed, now=now)
        (envs / f"{name}.yaml").write_text(dump(spec_data(name, bucket, endpoint)))
    return envs


def _status_env(env_extra) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("GROUNDCTL_ENDPOINT_URL", "GROUNDCTL_CLOUD_DEADLINE")}
    env.update(env_extra or {})
    return env


def _status(envs, *extra, env_extra=None, timeout=120):
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "groundctl", "fleet", "status", "--environments", str(envs), *extra],
                          capture_output=True, text=True, cwd=REPO, env=_status_env(env_extra), timeout=timeout)
    return proc, time.monotonic() - started


def _status_in_process(envs, *extra, env_extra=None):
    """`_status` through the front door in this process (tests/inprocess.py), sparing a process start-up; for
    fleets whose every bucket answers (nothing is left running when the command returns)."""
    from tests.inprocess import run_main

    return run_main(["fleet", "status", "--environments", str(envs), *extra], _status_env(env_extra))


def test_fail_on_decides_the_exit_code_both_ways(tmp_path, aws, emulator_endpoint):
    ok = Seed(drift_records=3, drill_records=4)
    envs = _fleet_dir(tmp_path, aws, emulator_endpoint, {"calm": ok, "drifty": Seed(drift_records=3, drill_records=4,
                                                                                       drifted_last=True)})
    # A drift outside production is a warning: it fails --fail-on warning, not --fail-on critical.
    for args, code in (((), 0), (("--fail-on", "critical"), 0), (("--fail-on", "warning"), 1)):
        proc = _status_in_process(envs, "--json", *args)
        assert proc.returncode == code, (args, proc.stderr)
        doc = json.loads(proc.stdout)
        assert doc["failing"] is bool(code)
        drifty = next(r for r in doc["environments"] if r["environment"] == "drifty")
        assert doc["environments"][0]["environment"] == "drifty"  # worst first
        drift = next(f for f in drifty["findings"] if f["rule"] == "drift")
        assert drifty["level"] == "warning" and drift["level"] == "warning" and drift["what"] == "drift in network"
        assert drift["next"] == {"command": "groundctl drift drifty", "runbook": "runbooks/fleet-findings.md#drift"}
        assert drift["since"] == drifty["drift"]["at"] and drift["since_age_seconds"] is not None
    failed = _fleet_dir(tmp_path / "b", aws, emulator_endpoint, {
        "broken": Seed(drift_records=3, drill_records=4, failed_kinds=("state-loss",))})
    # A real process: the table on stdout, the report on stderr, as separate streams.
    proc, _ = _status(failed, "--fail-on", "critical", env_extra={"COLUMNS": "400"})
    assert proc.returncode == 1, proc.stderr
    # The counts, naming the critical ones, head the table (and close the report on stderr).
    assert "1 critical" in proc.stdout.splitlines()[0] and "Critical: broken" in proc.stdout.splitlines()[0]
    assert "1 critical" in proc.stderr and "Critical: broken" in proc.stderr
    assert "critical: broken: state-loss drill failed" in proc.stderr
    assert "next: groundctl drill history broken (runbooks/fleet-findings.md#drill-failed)" in proc.stderr
    # The row says the state in words (the drills: failed); the next step is on the finding's line, once.
    row = next(line for line in proc.stdout.splitlines() if " broken " in line)
    assert row.split()[:2] == ["critical", "broken"] and " failed " in row and "groundctl" not in proc.stdout
    assert proc.stderr.count("next: groundctl drill history broken") == 1
    proc = _status_in_process(failed, "--fail-on", "attention")
    assert proc.returncode == 2 and "--fail-on 'attention' is not a level" in proc.stderr



def test_a_lock_past_its_ttl_held_on_another_host_is_lock_unknown_read_from_the_bucket(tmp_path, aws,
                                                                                         emulator_endpoint):
    """The lock rules above on rows made by hand; here the lock object is in the bucket, its heartbeat aged by the
    bucket's own clock: held on another host (a CI runner, another pod) and past its TTL, but not 3 TTLs old, it
    is the lock-unknown warning whose next step is lock break --force, through fleet status --json."""
    from bootstrap.aws.objectstore import ObjectStore
    from bootstrap.records import layout
    from bootstrap.records.lock_object import LockInfo
    from bootstrap.records.lock_status import lock_status

    ttl = 15  # STALE_TTLS of them leave fleet status half a minute to read it, on a loaded machine
    envs = _fleet_dir(tmp_path, aws, emulator_endpoint, {"held-away": Seed(drift_records=2, drill_records=4)})
    bucket = yaml.safe_load((envs / "held-away.yaml").read_text())["backend"]["bucket"]
    store = ObjectStore(aws.client("s3"), bucket)
    started = datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    store.put(layout.lock_key("held-away"), LockInfo(
        "held-away", "ci", "runner-7", 4242, "run-x", started, started, ttl,
        "6f7b6d4a-5d3c-4b8e-9a61-0c2d1e3f4a5b", 4026531836).body())
    deadline = time.monotonic() + 120
    while (lock_status(store, "held-away", with_pulumi_locks=False).heartbeat_age_seconds or 0) <= ttl:
        assert time.monotonic() < deadline, "the lock's heartbeat did not age past its TTL by the bucket's clock"
        time.sleep(1)
    proc = _status_in_process(envs, "--json")
    (row,) = json.loads(proc.stdout)["environments"]
    assert row["lock"]["verdict"] == "unknown" and row["lock"]["stale"] is False, row["lock"]
    (found,) = [f for f in row["findings"] if f["rule"].startswith("lock-")]
    assert found["rule"] == "lock-unknown" and found["level"] == "warning", found
    assert found["next"]["command"] == "groundctl lock break held-away --force"
    assert "another host (runner-7)" in found["what"] and "past its TTL" in found["what"]


def test_an_unreadable_environment_is_unreadable_and_needs_attention(tmp_path, aws, emulator_endpoint):
    envs = _fleet_dir(tmp_path, aws, emulator_endpoint, {"fine": Seed(drift_records=2, drill_records=4)})
    (envs / "away.yaml").write_text(dump(spec_data("away", "away-bucket", "http://127.0.0.1:9")))
    proc, _ = _status(envs, env_extra={"GROUNDCTL_CLOUD_DEADLINE": "5", "COLUMNS": "400"})
    assert proc.returncode == 0, proc.stderr
    away = next(line for line in proc.stdout.splitlines() if " away " in line)
    assert away.split()[:3] == ["warning", "away", "unreadable"]  # the reason is under the table, once
    assert "Could not read" not in proc.stdout and proc.stderr.count("Could not read s3://away-bucket/") == 1
    assert not any(word in away for word in ("never checked", "free", "no ledger", "none"))
    assert "1 warning" in proc.stderr and "1 unreadable" in proc.stderr and "warning: away: Could not" in proc.stderr
    proc, _ = _status(envs, "--fail-on", "warning", env_extra={"GROUNDCTL_CLOUD_DEADLINE": "5"})
    assert proc.returncode == 1


def test_a_stuck_environment_is_its_row_and_the_others_are_printed(tmp_path, aws, emulator_endpoint):
    from tests.test_bounded_waits import _Hostile, _drip

    envs = _fleet_dir(tmp_path, aws, emulator_endpoint, {"fine": Seed(drift_records=2, drill_records=4),
                                                         "also-fine": Seed(drift_records=2, drill_records=4)})
    with _Hostile(_drip) as server:  # answers one byte a second: no socket timeout ever fires
        (envs / "stuck.yaml").write_text(dump(spec_data("stuck", "stuck-bucket", server.url)))
        proc, took = _status(envs, "--json", env_extra={"GROUNDCTL_CLOUD_DEADLINE": "4"})
    assert proc.returncode == 0, proc.stderr
    rows = {r["environment"]: r for r in json.loads(proc.stdout)["environments"]}
    # Cut either by the call deadline on its reading thread (naming the endpoint) or, failing that, by the
    # fleet's own per-environment deadline: either way it is that row's error.
    error = rows["stuck"]["error"]
    assert ("did not finish answering within 4 s" in error or "was not read within 4 s" in error), error
    assert rows["stuck"]["level"] == "warning"
    assert rows["fine"]["drift"]["result"] == "clean" and rows["also-fine"]["drills"]["records"] == 4
    assert took < 40, took  # the stuck thread is left behind, not joined at exit


def test_a_spec_names_the_role_its_bucket_is_read_with(aws, emulator_endpoint, monkeypatch):
    from recovery.fleet import access
    from tests.faultproxy import FaultProxy

    # Throttling is retried until the call deadline: a short one keeps the refused role's wait short.
    monkeypatch.setenv("GROUNDCTL_CLOUD_DEADLINE", "6")
    s3 = aws.client("s3")
    data = {}
    for name in ("roled", "refused", "plain"):
        bucket = f"ro-{uuid.uuid4().hex[:16]}"
        seed_environment(s3, name, bucket, Seed(drift_records=2, drill_records=2))
        data[name] = spec_data(name, bucket, emulator_endpoint)
    data["roled"]["fleet"] = {"status_role_arn": "arn:aws:iam::123456789012:role/fleet-reader"}
    data["refused"]["fleet"] = {"status_role_arn": "arn:aws:iam::123456789012:role/nobody"}
    with pytest.raises(Exception, match="not an IAM role ARN"):
        parse_spec(dict(data["plain"], fleet={"status_role_arn": "fleet-reader"}), "plain")
    assumed = []
    real = access._Roles._assume

    def spy(base, role_arn):
        client = real(base, role_arn)
        assumed.append((role_arn, client._request_signer._credentials.access_key))
        return client

    monkeypatch.setattr(access._Roles, "_assume", staticmethod(spy))
    # STS refuses the one role (throttled on every try), while S3 and the other role pass untouched.
    refuse = lambda method, path, headers, body: b"AssumeRole" in body and b"nobody" in body  # noqa: E731
    with FaultProxy(emulator_endpoint, fraction=1.0, only=refuse, after_share=0.0) as proxy:
        specs = {n: parse_spec(dict(d, aws=dict(d["aws"], endpoint_url=proxy.endpoint_url)), n) for n, d in data.items()}
        rows = {r["environment"]: r for r in fleet_report(read_fleet(access.sources(specs.values(), None, {}), workers=3),
                                                          specs, time.time())["environments"]}
    assert rows["roled"]["drift"]["result"] == "clean" and not rows["roled"].get("error")
    assert [r for r, _ in assumed] == ["arn:aws:iam::123456789012:role/fleet-reader"]
    assert assumed[0][1] != "testing"  # the bucket was read with the role's credentials, not the caller's
    assert "nobody" in rows["refused"]["error"] and rows["refused"]["findings"][0]["rule"] == "unreadable"
    assert rows["plain"]["drift"]["result"] == "clean"
