"""`groundctl lock status|break <env>`: who holds an environment, and removing a lock whose holder is gone."""

from __future__ import annotations

import os
import socket
from dataclasses import asdict
from typing import Optional

import botocore.exceptions
import typer

from bootstrap import console
from bootstrap.aws import AwsClients, error_code
from bootstrap.cli import app
from bootstrap.errors import BadInput
from bootstrap.locks import break_lock, broken_key, current_user, lock_status
from bootstrap.objectstore import ObjectStore
from bootstrap.spec import load_spec

ENDPOINT_ENV = "GROUNDCTL_ENDPOINT_URL"

lock_app = typer.Typer(help="Show or break the environment lock.", no_args_is_help=True)
app.add_typer(lock_app, name="lock")

_ENV_ARG = typer.Argument(..., help="Environment name (environments/<name>.yaml) or a spec path.")
_ENDPOINT_OPT = typer.Option(None, "--endpoint-url",
                             help=f"AWS endpoint (e.g. a running emulator); also ${ENDPOINT_ENV}.")


def resolve_endpoint(spec, option: Optional[str], env_value: Optional[str]) -> Optional[str]:
    """The endpoint to talk to: the option, then the environment variable, then the spec. Pure."""
    chosen = option or env_value
    if chosen:
        return chosen
    if spec.aws.endpoint_url == "embedded":
        raise BadInput(
            f"Environment '{spec.name}' uses the embedded emulator, which lives only as long as the command "
            "that starts it, so there is no lock to read without one running. Run `groundctl emulator start`, "
            f"then pass its endpoint with --endpoint-url or {ENDPOINT_ENV}."
        )
    return spec.aws.endpoint_url


def _store(environment: str, endpoint_url: Optional[str]):
    spec = load_spec(environment)
    endpoint = resolve_endpoint(spec, endpoint_url, os.environ.get(ENDPOINT_ENV))
    clients = AwsClients.for_spec(spec, endpoint)
    return spec, ObjectStore(clients.client("s3"), spec.backend.bucket)


def _missing_bucket(spec, exc: botocore.exceptions.ClientError) -> BadInput:
    if error_code(exc) in ("NoSuchBucket", "404"):
        return BadInput(f"The state bucket '{spec.backend.bucket}' of environment '{spec.name}' does not exist "
                        "(at this endpoint), so nothing is locked. Check the endpoint, or run `groundctl up` first.")
    raise exc


@lock_app.command("status")
def status(environment: str = _ENV_ARG, endpoint_url: Optional[str] = _ENDPOINT_OPT,
           json_out: bool = typer.Option(False, "--json", help="Print the status as JSON.")) -> None:
    """Show the groundctl lock (holder, heartbeat, stale verdict) and Pulumi's stack locks."""
    spec, store = _store(environment, endpoint_url)
    try:
        st = lock_status(store, spec.name)
    except botocore.exceptions.ClientError as exc:
        raise _missing_bucket(spec, exc) from None
    if json_out:
        console.emit_json(st.to_dict())
        return
    if st.holder:
        h = st.holder
        console.data(f"{spec.name}: locked by {h.owner}@{h.host} pid {h.pid}, run {h.run_id}")
        console.data(f"  started {h.started_at}, last heartbeat {h.heartbeat_at} (TTL {h.ttl_seconds}s)")
        console.data(f"  {'STALE' if st.stale else 'alive'}: {st.reason}")
    elif st.unreadable:
        console.data(f"{spec.name}: locked by an unreadable lock object ({st.unreadable}); {st.reason}")
    else:
        console.data(f"{spec.name}: not locked")
    for p in st.pulumi_locks:
        console.data(f"  pulumi lock on {p.layer}/{spec.name}: {p.username or '?'}@{p.hostname or '?'} pid "
                     f"{p.pid if p.pid is not None else '?'} since {p.timestamp or '?'} ({p.key})")
    if not st.pulumi_locks:
        console.data("  no Pulumi stack locks")


@lock_app.command("break")
def break_(environment: str = _ENV_ARG, endpoint_url: Optional[str] = _ENDPOINT_OPT,
           force: bool = typer.Option(False, "--force",
                                      help="Break it even if the holder may be alive (recorded)."),
           json_out: bool = typer.Option(False, "--json", help="Print what was broken as JSON.")) -> None:
    """Remove the lock when its heartbeat has expired and its holder is gone (or with --force)."""
    spec, store = _store(environment, endpoint_url)
    by = f"{current_user()}@{socket.gethostname()}"
    try:
        info = break_lock(store, spec.name, force=force, by=by)
    except botocore.exceptions.ClientError as exc:
        raise _missing_bucket(spec, exc) from None
    if json_out:
        console.emit_json({"environment": spec.name, "broken": {k: v for k, v in asdict(info).items() if k != "etag"},
                           "forced": force, "by": by,
                           "record_prefix": broken_key(spec.name, "").rsplit("/", 1)[0] + "/"})
        return
    console.info(f"Broke the lock on {spec.name} held by {info.holder}{' (forced)' if force else ''}; the break "
                 f"is recorded under {broken_key(spec.name, '').rsplit('/', 1)[0]}/.")
