"""`groundctl lock status|break <env>`: who holds an environment, and removing a lock whose holder is gone."""

from __future__ import annotations

import socket
from dataclasses import asdict
from typing import Optional

import typer

from bootstrap import console
from groundctl.cli import app
from groundctl.common import Group, ENDPOINT_OPT, ENV_ARG, json_opt, state_reader

lock_app = typer.Typer(cls=Group, help="Show or break the environment lock.", no_args_is_help=True)
app.add_typer(lock_app, name="lock")


@lock_app.command("status")
def status(environment: str = ENV_ARG, endpoint_url: Optional[str] = ENDPOINT_OPT,
           json_out: bool = json_opt("the status")) -> None:
    """Show the groundctl lock (holder, heartbeat, stale verdict) and Pulumi's stack locks."""
    from bootstrap.records.locks import lock_status

    with state_reader(environment, endpoint_url) as target:
        spec, st = target.spec, lock_status(target.store, target.name)
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
def break_(environment: str = ENV_ARG, endpoint_url: Optional[str] = ENDPOINT_OPT,
           force: bool = typer.Option(False, "--force",
                                      help="Break it even if the holder may be alive (recorded)."),
           json_out: bool = json_opt("what was broken")) -> None:
    """Remove the lock when its heartbeat has expired and its holder is gone (or with --force)."""
    from bootstrap.records.locks import break_lock, broken_key, current_user

    by = f"{current_user()}@{socket.gethostname()}"
    with state_reader(environment, endpoint_url) as target:
        name, info = target.name, break_lock(target.store, target.name, force=force, by=by)
    prefix = broken_key(name, "").rsplit("/", 1)[0] + "/"
    if json_out:
        console.emit_json({"environment": name, "broken": {k: v for k, v in asdict(info).items() if k != "etag"},
                           "forced": force, "by": by, "record_prefix": prefix})
        return
    console.info(f"Broke the lock on {name} held by {info.holder}{' (forced)' if force else ''}; the break "
                 f"is recorded under {prefix}.")
