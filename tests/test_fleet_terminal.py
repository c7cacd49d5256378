"""`fleet status` in a terminal (issue 36): one line per environment at 80 columns, worst first, and each finding
and each reason listed once under the table, never squeezed into a cell."""

from __future__ import annotations

import copy
import io

import pytest
from rich.console import Console

from groundctl.fleet_view import cells, findings_lines, table
from recovery.fleet.status import fleet_report
from tests.fleetseed import dump, spec_data

LONG = ("it uses the embedded emulator, whose state lives only while one runs; start one (`groundctl emulator "
        "start`) and pass --endpoint-url or GROUNDCTL_ENDPOINT_URL")
DOWN = ("Could not read versioning of fl-0123456789abcdef: the endpoint http://127.0.0.1:9 could not be reached "
        "(connection refused). Check --endpoint-url and the network, then re-run.")


def _with_odd_rows(seeded_fleet) -> dict:
    """The seeded 50-environment fleet, plus a skipped and an unreadable environment with long reasons."""
    from bootstrap.spec import parse_spec

    report, _expected = copy.deepcopy(seeded_fleet)
    specs = {}
    raws = []
    for name, extra in (("dev-embedded-with-a-long-name-xy", {"skipped": LONG}), ("prod-unreachable", {"error": DOWN})):
        specs[name] = parse_spec(spec_data(name, f"bucket-{name[-8:]}", "http://127.0.0.1:9",
                                           production=name.startswith("prod"), replica="us-west-2"), name)
        raws.append({"environment": name, "bucket": specs[name].backend.bucket, "problems": []} | extra)
    odd = fleet_report(raws, specs, now=0)["environments"]
    report["environments"] = sorted(report["environments"] + odd, key=lambda r: (
        ("critical", "warning", "info", "ok").index(r["level"]), not r["production"], r["environment"]))
    return report


def _render(report: dict, width: int = 80) -> list[str]:
    out = io.StringIO()
    Console(file=out, width=width, highlight=False, markup=False, emoji=False).print(table(report))
    return out.getvalue().splitlines()


def test_one_line_per_environment_at_80_columns_worst_first(seeded_fleet):
    report = _with_odd_rows(seeded_fleet)
    lines = _render(report)
    assert max(len(line) for line in lines) <= 80, "\n".join(lines)
    names = [r["environment"] for r in report["environments"]]
    rows = [line for line in lines if line.split()[:1] and line.split()[0] in ("critical", "warning", "info", "ok")]
    assert len(rows) == len(names), "\n".join(lines)  # not one more: no row wrapped onto a second line
    for line, r in zip(rows, report["environments"]):
        assert line.split()[0] == r["level"]
        shown = line.split()[1].rstrip("…")
        assert r["environment"].startswith(shown), (line, r["environment"])  # in the report's order: worst first
    # The reasons are not in the table; the row says only the state.
    text = "\n".join(lines)
    assert "embedded emulator" not in text and "could not be reached" not in text
    assert "skipped" in next(x for x in rows if "dev-embedded" in x)
    assert "unreadable" in next(x for x in rows if "prod-unreachable" in x)


def test_findings_and_reasons_are_listed_once_under_the_table(seeded_fleet):
    report = _with_odd_rows(seeded_fleet)
    under = findings_lines(report)
    assert sum(LONG in line for line in under) == 1 and sum(DOWN in line for line in under) == 1
    assert any(line.startswith("critical: prod-unreachable: ") and "[unreadable]" in line for line in under)
    wanted = [(r["environment"], f["rule"]) for r in report["environments"] for f in r["findings"]
              if f["level"] in ("critical", "warning")]
    assert len([ln for ln in under if "[skipped]" not in ln]) == len(wanted)
    # Worst environment first, as in the table.
    first_env = [ln.split(": ")[1] for ln in under]
    order = [r["environment"] for r in report["environments"]]
    assert first_env == sorted(first_env, key=order.index)


def test_a_row_is_words_and_short_ages():
    row = {"environment": "prod-x", "production": True, "level": "critical", "findings": [],
           "drift": {"result": "drift", "age_seconds": 3 * 3600},
           "drills": {"per_kind": {"rebuild-cluster": {"last": {"verdict": "passed"}, "trend": {"trend": "slower"}},
                                   "state-loss": {"last": {"verdict": "failed"}}}},
           "rehearsals": {"layers": {"network": {"last": {"outcome": "proven"},
                                                 "last_proven": {"age_seconds": 5 * 86400}},
                                     "cluster": {"last": {"outcome": "proven"},
                                                 "last_proven": {"age_seconds": 3600}}}},
           "lock": {"held": True, "stale": True}, "protection": {"verdict": "at-risk"}}
    assert cells(row) == ["critical", "prod-x *", "drift 3h", "failed", "5d", "stale", "at-risk"]


@pytest.mark.emulator
def test_the_command_prints_one_line_per_environment_at_80_columns(tmp_path, aws, emulator_endpoint):
    """The real command in a process with COLUMNS=80, as a terminal would run it."""
    from tests.fleetseed import Seed
    from tests.test_fleet_findings import _fleet_dir, _status

    envs = _fleet_dir(tmp_path, aws, emulator_endpoint, {
        "payments-team-with-a-long-name-x": Seed(drift_records=3, drill_records=4, drifted_last=True),
        "calm": Seed(drift_records=3, drill_records=4)})
    (envs / "local.yaml").write_text(dump(spec_data("local", "local-bucket", "embedded")))
    proc, _ = _status(envs, env_extra={"COLUMNS": "80"})
    assert proc.returncode == 0, proc.stderr
    table_lines = proc.stdout.splitlines()
    assert max(len(x) for x in table_lines) <= 80, proc.stdout
    for name in ("payments-team", "calm", "local"):
        assert sum(name in x for x in table_lines) == 1, proc.stdout
    assert "embedded emulator" not in proc.stdout
    under = " ".join(proc.stderr.split())  # the lines under the table wrap as paragraphs do
    assert under.count("embedded emulator, whose state lives only while one runs") == 1, proc.stderr
    assert "warning: payments-team-with-a-long-name-x: drift in network [drift]" in under
