"""`groundctl fleet …`: run groundctl on a schedule in a cluster, and see every environment at once."""

from __future__ import annotations

import os
import time
from dataclasses import replace
from pathlib import Path
from typing import Optional

import typer

from bootstrap.kit import console
from bootstrap.kit.errors import BadInput
from groundctl.cli import app
from groundctl.common import ENDPOINT_OPT, Group, json_opt, writable_dir

fleet_app = typer.Typer(cls=Group, help="Scheduled drift checks and drills across many environments, and their status.",
                        no_args_is_help=True)
app.add_typer(fleet_app, name="fleet")

_ENVS = typer.Option(None, "--environments", help="Folder of environment specs (default: ./environments).")


def _spec_paths(folder: Optional[Path]) -> tuple[Path, list[Path]]:
    """The folder of specs and every `*.yaml` in it, refused with the fix when there is none to read."""
    from bootstrap.spec.spec_file import ENVIRONMENTS_DIR, environments_dir

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
    return base, paths


def _specs(folder: Optional[Path]) -> list:
    """Every spec of the folder, validated (each file read once: status needs no text as written)."""
    from bootstrap.spec import load_spec

    base, paths = _spec_paths(folder)
    return [load_spec(p.stem, base=base) for p in paths]


def _spec_files(folder: Optional[Path], *, manifests: bool = True):
    """Every `*.yaml` of the folder, validated, with its text as written (and, with `manifests`, the Flux manifest
    each names: only the CronJobs mount it, and finding it parses every spec a second time)."""
    from bootstrap.spec import load_spec
    from recovery.fleet.manifests import SpecFile

    base, paths = _spec_paths(folder)
    files = [SpecFile(load_spec(p.stem, base=base), p.name, _spec_text(p)) for p in paths]
    if not manifests:
        return files
    return [replace(f, manifest_text=_repository_manifest(base.parent, f.flux_manifest_path)) for f in files]


def _spec_text(path: Path) -> str:
    """The spec's text as written (load_spec has read and checked it): bounded like every file a user names."""
    from bootstrap.kit.user_files import read_user_file
    from bootstrap.spec.spec_file import MAX_SPEC_BYTES

    data = read_user_file(str(path), what="The environment spec", max_bytes=MAX_SPEC_BYTES,
                          fix="Give the folder that holds the fleet's <env>.yaml specs")
    return data.decode("utf-8", "replace")  # load_spec refused one that is not UTF-8


# A manifest over a ConfigMap's 1 MiB is still read, so the render can say that it is too large.
MANIFEST_MAX_BYTES = 64 * 1024 * 1024


def _repository_manifest(root: Path, written: Optional[str]) -> Optional[str]:
    """The text of a Flux manifest the spec names by a repository path (relative to the folder that holds the
    specs' folder), which the pods mount; None for none, a URL, an absolute path or a file that cannot be read
    (the render says why each is no use to a pod)."""
    from bootstrap.kit.user_files import UnusableFile, read_user_file

    if not written or written.startswith(("/", "http://", "https://")):
        return None
    try:
        return read_user_file(str(root / written), what="", max_bytes=MANIFEST_MAX_BYTES, fix="").decode("utf-8")
    except (UnusableFile, UnicodeDecodeError):
        return None


@fleet_app.command("manifests")
def manifests(
    image: str = typer.Option(..., "--image", help="The groundctl image the CronJobs run (built from the Dockerfile); "
                              "pin it by digest, e.g. registry/groundctl@sha256:…"),
    environments: Optional[Path] = _ENVS,
    namespace: str = typer.Option("groundctl", "--namespace", help="Namespace of every object."),
    out: Optional[Path] = typer.Option(None, "--out", help="Write the YAML to this file instead of stdout."),
    memory_limit: Optional[str] = typer.Option(
        None, "--memory-limit", help="Memory limit of the drift and rehearsal pods (e.g. 2Gi) where a spec sets no "
        "fleet.memory_limit (default: 1Gi)."),
    drift: bool = typer.Option(True, "--drift/--no-drift", help="Schedule the hourly drift CronJobs; --no-drift "
                               "leaves them out when the drift checks run elsewhere (`ci init`'s drift workflow)."),
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
    files = _spec_files(environments)
    from bootstrap.spec.spec_file import environments_dir
    from groundctl.pins import require_covered

    # The render is pure: what is wrong with the input (exit 2) is said before what the lock lacks (exit 4).
    rendered = render(files, image=image, ns=namespace, memory_limit=memory_limit, drift=drift)
    specs = environments or environments_dir()
    require_covered(specs.parent, "Writing the fleet's manifests (the image installs the CLI and plugins from the "
                    "pins lock)", specs=specs)
    if json_out:
        console.emit_json({"manifests": list(rendered.manifests), "notes": list(rendered.notes)})
    elif out is not None:
        write_text(out, to_yaml(rendered.manifests))
        console.info(f"Wrote {len(rendered.manifests)} manifests to {out}")
    else:
        typer.echo(to_yaml(rendered.manifests), nl=False)
    for note in rendered.notes:
        console.info(note)


@fleet_app.command("status")
def status(
    environments: Optional[Path] = _ENVS,
    json_out: bool = json_opt("the status of every environment, with each finding's level"),
    html: Optional[Path] = typer.Option(None, "--html", help="Also write fleet-status.html (one static file: a summary, "
                                        "then one row per environment linking to its collapsed details) into this folder."),
    fail_on: Optional[str] = typer.Option(None, "--fail-on", help="Exit 1 when any finding is at this level or worse: "
                                          "critical, or warning (critical and warning). Without it the exit is 0."),
    workers: int = typer.Option(8, "--workers", min=1, max=16, help="Environments read at once."),
    endpoint_url: Optional[str] = ENDPOINT_OPT,
) -> None:
    """Per environment, worst first: findings (critical / warning / info), drift and its age, the last drill of each
    kind and its RTO trend, lock, ledger head age, bucket protection vs RPO."""
    from bootstrap.aws.clients import call_deadline
    from recovery.fleet.access import sources
    from recovery.evidence.reading import read_fleet
    from recovery.fleet.status import failing, fleet_report

    if fail_on is not None and fail_on not in ("critical", "warning"):
        raise BadInput(f"--fail-on '{fail_on[:40]}' is not a level; use --fail-on critical (exit 1 on critical findings) "
                       "or --fail-on warning (on critical or warning findings).")
    writable_dir(html, "--html")
    specs = _specs(environments)
    # Each environment gets what one AWS call may take (GROUNDCTL_CLOUD_DEADLINE): a stuck one is its own row.
    raws = read_fleet(sources(specs, endpoint_url, os.environ), workers=workers, deadline=call_deadline())
    report = fleet_report(raws, {spec.name: spec for spec in specs}, time.time())
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
        console.emit_json(report | {"fail_on": fail_on, "failing": failing(report, fail_on)})
    else:
        from groundctl.fleet_view import show

        show(report)
    if report.get("html"):
        console.info(f"Wrote {report['html']}")
    if failing(report, fail_on):
        raise typer.Exit(1)
