"""`groundctl lock status|break <env>`: who holds an environment (groundctl's lock and Pulumi's stack locks),
and removing a lock whose holder is gone."""

from __future__ import annotations

import socket
import time
from dataclasses import asdict
from typing import Optional

import typer

from bootstrap.kit import console
from groundctl.cli import app
from groundctl.common import Group, ENDPOINT_OPT, ENV_ARG, json_opt, state_reader

lock_app = typer.Typer(cls=Group, help="Show or break the environment lock.", no_args_is_help=True)
app.add_typer(lock_app, name="lock")


@lock_app.command("status")
def status(environment: str = ENV_ARG, endpoint_url: Optional[str] = ENDPOINT_OPT,
           json_out: bool = json_opt("the status")) -> None:
    """Show the groundctl lock (holder, heartbeat; alive, DEAD, unknown or STALE) and Pulumi's stack locks (holder
    alive, dead or unknown).

    Exit 1 when a lock object cannot be read (it is named, with why)."""
    from bootstrap.records.lock_status import lock_status

    with state_reader(environment, endpoint_url) as target:
        spec, st = target.spec, lock_status(target.store, target.name)
    unreadable = bool(st.unreadable) or any(p.unreadable for p in st.pulumi_locks)
    if json_out:
        console.emit_json(st.to_dict())
    else:
        _show(spec.name, st)
    if unreadable:
        raise typer.Exit(1)


def _show(name: str, st) -> None:
    if st.holder:
        h = st.holder
        console.data(f"{name}: locked by {h.owner}@{h.host} pid {h.pid}, run {h.run_id}")
        console.data(f"  started {h.started_at}, last heartbeat {h.heartbeat_at} (TTL {h.ttl_seconds}s)")
        console.data(f"  {st.verdict.upper() if st.stale else st.verdict}: {st.reason}")
    elif st.unreadable:
        console.data(f"{name}: locked by an unreadable lock object ({st.unreadable}): {st.reason}")
    else:
        console.data(f"{name}: not locked by groundctl")
    for p in st.pulumi_locks:
        console.data(f"  pulumi lock on {p.layer}/{name}: {p.holder} ({p.key})")
        console.data(f"    holder {p.holder_state}: {p.reason}")
    if not st.pulumi_locks:
        console.data("  no Pulumi stack locks")


@lock_app.command("break")
def break_(environment: str = ENV_ARG, endpoint_url: Optional[str] = ENDPOINT_OPT,
           force: bool = typer.Option(False, "--force",
                                      help="Break it even if the holder may be alive (recorded); never a Pulumi lock "
                                           "whose holder is seen alive on this host."),
           pulumi: Optional[str] = typer.Option(None, "--pulumi", metavar="LAYER",
                                                help="Remove Pulumi's stack lock on this layer instead (only that "
                                                     "stack's, and only when its holder is proven dead)."),
           json_out: bool = json_opt("what was broken")) -> None:
    """Remove the lock when its holder is proven dead or its heartbeat is stale (or with --force)."""
    from bootstrap.records.layout import lock_key
    from bootstrap.records.lock_object import broken_key
    from bootstrap.records.lock_status import UNREADABLE_OWNER, break_lock
    from bootstrap.records.locks import current_user

    by = f"{current_user()}@{socket.gethostname()}"
    if pulumi is not None:
        _break_pulumi(environment, endpoint_url, pulumi, force, by, json_out)
        return
    with state_reader(environment, endpoint_url) as target:
        name, info = target.name, break_lock(target.store, target.name, force=force, by=by)
    prefix = broken_key(name, "").rsplit("/", 1)[0] + "/"
    if json_out:
        console.emit_json({"environment": name, "broken": {k: v for k, v in asdict(info).items() if k != "etag"},
                           "forced": force, "by": by, "record_prefix": prefix})
        return
    held = (f"the unreadable lock object {lock_key(name)}" if info.owner == UNREADABLE_OWNER
            else f"the lock on {name} held by {info.holder}")
    console.info(f"Broke {held}{' (forced)' if force else ''}; the break is recorded under {prefix}, with the "
                 "object as it was.")


def _break_pulumi(environment: str, endpoint_url: Optional[str], layer_name: str, force: bool, by: str,
                  json_out: bool) -> None:
    from bootstrap.layers import layer
    from bootstrap.records.lock_object import iso
    from bootstrap.records.pulumi_locks import break_locks

    layer(layer_name)  # a typo is bad input, not "no lock"
    with state_reader(environment, endpoint_url) as target:
        name = target.name
        broken = break_locks(target.store, name, layer_name, force=force, by=by, at=iso(time.time()))
    prefix = f".groundctl/locks/broken/{name}/"
    if json_out:
        console.emit_json({"environment": name, "layer": layer_name, "broken": [p.to_dict() for p in broken],
                           "by": by, "record_prefix": prefix})
        return
    for p in broken:
        forced = " (forced)" if p.holder_state != "dead" else ""
        console.info(f"Removed Pulumi's lock {p.key} held by {p.holder}{forced}: {p.reason}; a copy is kept under "
                     f"{prefix}.")
