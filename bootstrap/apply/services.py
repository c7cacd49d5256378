"""The I/O the runner performs besides the engine, passed in as `Services` so tests can count, fail or
replace any of it."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Optional

from bootstrap.kit import console
from bootstrap.records.runs import git_commit
from bootstrap.target import probe_tcp


def _kube_client(spec, kubeconfig: str):
    from bootstrap.kube.api import client_for
    return client_for(spec, kubeconfig)


def _ledger_serial(store, layer: str, environment: str) -> int:
    from bootstrap.records.ledger import read_ledger
    return read_ledger(store, layer, environment).highest_serial


@dataclass
class Services:
    """The I/O the runner performs besides the engine. Defaults are the product's modules."""
    check_account: Callable
    ensure_backend: Callable
    environment_lock: Callable  # (store, environment, run_id) -> context manager
    append_record: Callable
    confirm: Callable[[str], bool] = console.confirm
    clock: Callable[[], float] = time.time
    probe: Callable[[str, int], Optional[str]] = probe_tcp
    git_commit: Callable[[], Optional[str]] = git_commit
    # (store, layer, environment) -> the highest serial the layer's ledger holds, 0 for none
    ledger_serial: Callable[..., int] = _ledger_serial
    # (spec, kubeconfig text) -> a Kubernetes API client, for Flux's readiness at the end of the flux layer
    kube_for: Callable[..., Any] = _kube_client
    sleep: Callable[[float], None] = time.sleep


def default_services(**overrides) -> Services:
    """The product's services; anything in `overrides` replaces (and never imports) the default."""
    def lock(store, environment, run_id):
        from bootstrap.records.locks import EnvironmentLock
        return EnvironmentLock(store, environment, run_id)

    def append(*args, **kwargs):
        from bootstrap.records.ledger import append_record
        return append_record(*args, **kwargs)

    def account(spec, clients):
        from bootstrap.aws.backend import check_account
        return check_account(spec, clients)

    def backend(spec, clients):
        from bootstrap.aws.backend import ensure_backend
        return ensure_backend(spec, clients)

    base = dict(check_account=account, ensure_backend=backend, environment_lock=lock, append_record=append)
    base.update(overrides)
    return Services(**base)
