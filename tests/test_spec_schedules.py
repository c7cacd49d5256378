"""Fleet schedules (issue 27 §4): what Kubernetes CronJobs and groundctl's reader both accept works, with a
freshness threshold; anything else is a spec error naming the field."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
import yaml
from cronsim import CronSim

from bootstrap.kit.errors import SpecError
from bootstrap.spec import parse_spec
from recovery.fleet.cadence import longest_gap_minutes
from recovery.fleet.status import freshness
from tests.test_spec import raw

DAY = 1440


def _with(field: str, schedule: str) -> dict:
    data = raw("dev")
    data["fleet"] = {field: schedule}
    return data


def _problems(data: dict) -> list[tuple[str, str]]:
    with pytest.raises(SpecError) as info:
        parse_spec(data, "environments/dev.yaml")
    return info.value.problems


ACCEPTED = ["0 6 * * MON-FRI", "17 * * * *", "*/15 * * * *", "0 9 * * 1-5", "0 0 1 * *", "0 0 * * mon",
            "5 4 * JAN,JUL SUN", "0 0 1-31/2 * *", "30 2 */3 * *", "0 12 15 * FRI", "0 0 29 2 *", "5/20 * * * *",
            "0 22 * * 0", "0 3 * * SAT,SUN", "0  6 *\t* MON-FRI"]


@pytest.mark.parametrize("schedule", ACCEPTED)
@pytest.mark.parametrize("field", ["drift_schedule", "rebuild_drill_schedule", "state_loss_drill_schedule"])
def test_a_schedule_kubernetes_and_the_reader_accept_passes_and_has_a_gap(field, schedule):
    spec = parse_spec(_with(field, schedule), "environments/dev.yaml")
    assert getattr(spec.fleet, field) == schedule
    assert longest_gap_minutes(schedule) is not None


REFUSED = {
    "0 6 * *": "has 4 fields",
    "0 6 * * * *": "has 6 fields",
    "@daily": "has 1 field",
    "0 6 * * 7": "day-of-week 7 is outside 0-6 (Sunday is 0 or SUN)",
    "0 6 * * FRI-MON": "runs backwards",
    "60 * * * *": "minute 60 is outside 0-59",
    "0 24 * * *": "hour 24 is outside 0-23",
    "0 0 0 * *": "day-of-month 0 is outside 1-31",
    "0 0 * 13 *": "month 13 is outside 1-12",
    "0 0 * FOO *": "month 'FOO' is not a number or a name",
    "0 0 * * MONDAY": "term 'MONDAY'",
    "0 0 L * *": "term 'L'",
    "0 0 * * 5L": "term '5L'",
    "0 0 * * MON#2": "term 'MON#2'",
    "0 0 ? * MON": "term '?'",
    "H 0 * * *": "term 'H'",
    "*/0 * * * *": "step in '*/0' is 0",
    "*-5 * * * *": "term '*-5'",
    "CRON_TZ=UTC 0 6 * * *": "names a time zone",
    "0 0 */2 * MON": "read two ways",
    "0 0 31 2 *": "never runs",
}


@pytest.mark.parametrize("schedule, why", REFUSED.items())
def test_anything_else_is_a_spec_error_naming_the_field(schedule, why):
    (where, what), = _problems(_with("drift_schedule", schedule))
    assert where == "fleet.drift_schedule"
    assert why in what, what


@pytest.mark.parametrize("schedule", ["0 0 ? * MON", "*-5 * * * *", "?/10 * * * *"])
def test_a_term_kubernetes_reads_as_a_star_is_refused_as_the_readers_refusal_not_kubernetes(schedule):
    """The API server accepts these (robfig reads the term as *: tests/test_cluster_tier_schedules.py); cronsim
    does not, so they stay refused, and the refusal no longer says Kubernetes would not take them."""
    (where, what), = _problems(_with("drift_schedule", schedule))
    assert where == "fleet.drift_schedule"
    assert what.startswith("groundctl (cronsim) does not accept it, though Kubernetes reads that term as *"), what


def test_the_issue_schedule_turns_the_freshness_rule_on():
    """`0 6 * * MON-FRI` passed the spec check but had no gap, so drift-stale was silently off."""
    spec = parse_spec(_with("drift_schedule", "0 6 * * MON-FRI"), "environments/dev.yaml")
    fresh = freshness(spec)
    assert fresh["drift_schedule"] == "0 6 * * MON-FRI"
    assert fresh["drift_max_age_seconds"] == 2 * 3 * DAY * 60  # Friday 06:00 to Monday 06:00, twice


@pytest.mark.parametrize("schedule, gap", [
    ("0 6 * * MON-FRI", 3 * DAY), ("0 0 * * MON", 7 * DAY), ("0 0 1 * *", 31 * DAY), ("0 0 29 2 *", 1461 * DAY),
    ("0 0 1 JAN,JUL *", 184 * DAY), ("0 12 15 * FRI", 7 * DAY), ("30 2 */3 * *", 3 * DAY),
    ("0 0 1-31/2 * *", 2 * DAY), ("0 8-18 * * 1-5", 62 * 60), ("0 0 * * 0", 7 * DAY),
])
def test_the_longest_gap_is_exact(schedule, gap):
    assert longest_gap_minutes(schedule) == gap


@pytest.mark.parametrize("schedule", ["0 6 * * MON-FRI", "0 0 1 JAN,JUL *", "0 12 15 * FRI", "30 2 */3 * *",
                                      "0 8-18 * * 1-5", "15 */4 1,15 * *", "0 0 13 * FRI"])
def test_the_gap_is_the_libraries_own_reading(schedule):
    """The longest gap over six years of runs as cronsim iterates them is the computed one."""
    it = CronSim(schedule, datetime(2001, 1, 1, tzinfo=timezone.utc))
    runs = []
    for when in it:
        if when.year >= 2007:
            break
        runs.append(when)
    seen = max((b - a).total_seconds() / 60 for a, b in zip(runs, runs[1:]))
    assert seen == longest_gap_minutes(schedule)


def test_the_fleet_manifests_schedule_only_what_the_check_accepts():
    from bootstrap.spec.cron import schedule_problem
    from recovery.fleet.manifests import schedules

    for name in ("dev", "prod", "a-very-long-environment-name-1"):
        data = raw("dev")
        data["name"] = name
        for schedule in schedules(parse_spec(data, "x.yaml")).values():
            assert schedule_problem(schedule) is None, schedule


def test_spec_check_exits_2_naming_the_field(tmp_path, monkeypatch, capsys):
    from tests.test_cli_errors import groundctl

    data = _with("drift_schedule", "0 6 * * 7")
    path = tmp_path / "dev.yaml"
    path.write_text(yaml.safe_dump(data))
    code, out, err = groundctl(monkeypatch, capsys, "spec", "check", str(path))
    assert code == 2
    assert "fleet.drift_schedule" in err and "Sunday is 0 or SUN" in " ".join(err.split())


# -- the restore rehearsal's schedule (issue 28): a field of `recovery`, read as the fleet's schedules are ----

def _rehearsing(schedule: str) -> dict:
    data = raw("dev")
    data["recovery"]["rehearsal_schedule"] = schedule
    return data


@pytest.mark.parametrize("schedule", ACCEPTED)
def test_a_rehearsal_schedule_both_readers_accept_passes(schedule):
    spec = parse_spec(_rehearsing(schedule), "environments/dev.yaml")
    assert spec.recovery.rehearsal_schedule == schedule
    assert freshness(spec)["rehearsal_max_age_seconds"] == 2 * longest_gap_minutes(schedule) * 60


@pytest.mark.parametrize("schedule, why", REFUSED.items())
def test_a_rehearsal_schedule_either_refuses_names_its_field(schedule, why):
    with pytest.raises(SpecError) as info:
        parse_spec(_rehearsing(schedule), "environments/dev.yaml")
    (where, what), = info.value.problems
    assert where == "recovery.rehearsal_schedule"
    assert why in what, what


def test_rehearsals_run_daily_by_default_at_a_time_spread_by_the_name():
    from recovery.fleet.manifests import schedules

    times = set()
    for name in ("dev", "stage", "prod-payments", "prod-ledger"):
        data = raw("dev")
        data["name"] = name
        spec = parse_spec(data, "x.yaml")
        assert spec.recovery.rehearsal_schedule is None
        schedule = schedules(spec)["rehearsal"]
        assert longest_gap_minutes(schedule) == DAY, schedule
        assert freshness(spec)["rehearsal_schedule"] == schedule
        assert freshness(spec)["rehearsal_max_age_seconds"] == 2 * DAY * 60
        times.add(schedule)
    assert len(times) > 1
