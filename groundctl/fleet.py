"""`groundctl fleet …`: run groundctl on a schedule in a cluster, and see every environment at once."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Optional

import typer
from rich.text import Text

from bootstrap import console
from bootstrap.errors import BadInput
from groundctl.cli import app
from groundctl.common import ENDPOINT_OPT, Group, json_opt, table, writable_dir

fleet_app = typer.Typer(cls=Group, help="Scheduled drift checks and drills across many environments, and their status.",
                        no_args_is_help=True)
app.add_typer(fleet_app, name="fleet")

_ENVS = typer.Option(None, "--environments", help="Folder of environment specs (default: ./environments).")


def _spec_files(folder: Optional[Path]):
    """Every `*.yaml` of the folder, validated, with its text as written."""
    from bootstrap.spec import ENVIRONMENTS_DIR, environments_dir, load_spec
    from recovery.fleet.manifests import SpecFile

    base = folder or environments_dir()
    if folder is None and base == ENVIRONMENTS_DIR and not (Path.cwd() / "environments").is_dir():
        # A fleet of the shipped examples (account 111111111111) is never what an operator means to schedule.
        raise BadInput(f"{Path.cwd()} holds no environments/ folder, and the fleet commands never fall back to "
                       "groundctl's bundled example specs. Run from the folder that holds your environments/, or "
                       "give it with --environments.")
    if not base.is_dir():
        raise BadInput(f"--environments {base} is not a folder. Give the folder that holds the fleet's "
                       "<env>.yaml specs.")
    paths = sorted(base.glob("*.yaml"))
    if not paths:
        raise BadInput(f"No environment spec (*.yaml) in {base}. Give the folder that holds the fleet's specs.")
    return [SpecFile(load_spec(p.stem, base=base), p.name, p.read_text()) for p in paths]


@fleet_app.command("manifests")
def manifests(
    image: str = typer.Option(..., "--image", help="The groundctl image the CronJobs run (built from the Dockerfile); "
                              "pin it by digest, e.g. registry/groundctl@sha256:…"),
    environments: Optional[Path] = _ENVS,
    namespace: str = typer.Option("groundctl", "--namespace", help="Namespace of every object."),
    out: Optional[Path] = typer.Option(None, "--out", help="Write the YAML to this file instead of stdout."),
    json_out: bool = json_opt("the manifests (a list) and the notes"),
) -> None:
    """Kubernetes manifests: per environment a drift CronJob and drill CronJobs, their ServiceAccounts, the specs."""
    import re

    from recovery.fleet.manifests import render, to_yaml

    if not re.fullmatch(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", namespace):
        raise BadInput(f"--namespace '{namespace}' is not a Kubernetes namespace name; use lowercase letters, "
                       "digits and hyphens (at most 63).")
    if not re.fullmatch(r"[^\s]+", image) or image.endswith(":latest") or ":" not in image.rsplit("/", 1)[-1] and "@" not in image:
        raise BadInput(f"--image '{image}' is not pinned: give a tag (registry/groundctl:0.1.0) or, better, a digest "
                       "(registry/groundctl@sha256:…), so every scheduled run uses the same groundctl.")
    from bootstrap.destinations import check_file, write_text

    check_file(out)
    rendered = render(_spec_files(environments), image=image, ns=namespace)
    if json_out:
        console.emit_json({"manifests": list(rendered.manifests), "notes": list(rendered.notes)})
    elif out is not None:
        write_text(out, to_yaml(rendered.manifests))
        console.info(f"Wrote {len(rendered.manifests)} manifests to {out}")
    else:
        typer.echo(to_yaml(rendered.manifests), nl=False)
    for note in rendered.notes:
        console.info(note)


def _sources(files, endpoint_url: Optional[str]):
    """One `Source` per spec; AWS clients shared by every environment of the same region and endpoint."""
    from bootstrap.aws.clients import AwsClients
    from bootstrap.aws.objectstore import ObjectStore
    from bootstrap.target import ENDPOINT_ENV, resolve_endpoint
    from recovery.fleet.status import Source

    shared: dict[tuple, AwsClients] = {}
    out = []
    for f in files:
        spec = f.spec
        try:
            url = resolve_endpoint(spec, endpoint_url, os.environ).url
        except BadInput as exc:
            out.append(Source(spec, skip=exc.message))
            continue
        if url == "embedded":
            out.append(Source(spec, skip=f"it uses the embedded emulator, whose state lives only while one runs; "
                                         f"start one (`groundctl emulator start`) and pass --endpoint-url or {ENDPOINT_ENV}"))
            continue
        resolved = spec.model_copy(update={"aws": spec.aws.model_copy(update={"endpoint_url": url})})
        key = (spec.aws.region, url, None if url else spec.aws.profile)
        if key not in shared:
            shared[key] = AwsClients.for_spec(resolved, url)
        s3 = shared[key].client("s3")
        out.append(Source(resolved, ObjectStore(s3, spec.backend.bucket), s3))
    return out


@fleet_app.command("status")
def status(
    environments: Optional[Path] = _ENVS,
    json_out: bool = json_opt("the status of every environment"),
    html: Optional[Path] = typer.Option(None, "--html", help="Also write fleet-status.html (one static file with the "
                                        "drill timelines) into this folder."),
    workers: int = typer.Option(8, "--workers", min=1, max=10, help="Environments read at once."),
    endpoint_url: Optional[str] = ENDPOINT_OPT,
) -> None:
    """Per environment: last drift and its age, last drill and RTO trend, lock, ledger head age, bucket protection vs RPO."""
    from recovery.fleet.status import fleet_report, read_fleet

    writable_dir(html, "--html")
    files = _spec_files(environments)
    sources = _sources(files, endpoint_url)
    raws = read_fleet(sources, workers=workers)
    report = fleet_report(raws, {f.spec.name: f.spec for f in files}, time.time())
    if html is not None:
        from recovery.fleet.html import render

        from bootstrap.destinations import write_files

        page, = write_files(html, {"fleet-status.html": render(report)}, "--html")
        report["html"] = str(page)
    for row in report["environments"]:
        # The timelines are the page's drawing material (every phase of the latest drills): a JSON reader
        # gets the verdicts and trends, and `groundctl drill history <env>` for the phases.
        (row.get("drills") or {}).pop("timelines", None)
    if json_out:
        console.emit_json(report)
    else:
        _show(report)
    if report.get("html"):
        console.info(f"Wrote {report['html']}")


def _age(seconds: Optional[float]) -> str:
    if seconds is None:
        return "—"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.0f} h" if seconds < 172800 else f"{seconds / 86400:.0f} days"


def _show(report: dict) -> None:
    rows = table("fleet status", "environment", "drift", "last drill (RTO trend)", "lock", "ledger head", "bucket vs RPO")
    for r in report["environments"]:
        if r.get("skipped"):
            rows.add_row(Text(r["environment"]), Text(f"skipped: {r['skipped']}"), *(Text("") for _ in range(4)))
            continue
        d, dr, lock, led, prot = (r.get("drift"), (r.get("drills") or {}), r.get("lock") or {}, r.get("ledger") or {},
                                  r.get("protection") or {})
        last = dr.get("last")
        trends = ", ".join(f"{k} {t['trend']}" for k, t in (dr.get("trends") or {}).items())
        rows.add_row(
            Text(r["environment"] + (" (error: " + r["error"] + ")" if r.get("error") else "")),
            Text(f"{d['result']} {_age(d['age_seconds'])} ago" if d else "never checked"),
            Text(f"{last['kind']} {last['verdict']}" + (f" ({trends})" if trends else "") if last else "none"),
            Text(("stale: " if lock.get("stale") else "") + (lock.get("holder") or "held") if lock.get("held") else "free"),
            Text(f"{_age(led.get('head_age_seconds'))} ago" if led.get("head_at") else "no ledger"),
            Text(f"{prot.get('verdict', '—')} (RPO {r['rpo_minutes']} min)"))
    console.data(rows)
    c = report["counts"]
    console.info(f"{c['environments']} environments, {c['needing_attention']} needing attention, {c['skipped']} skipped")
    for r in report["environments"]:
        for item in r.get("attention") or []:
            console.warn(f"{r['environment']}: {item}")
