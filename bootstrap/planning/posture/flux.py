"""Posture rules of the flux layer: pinned controllers, source ref, root Kustomization, deploy key."""

from __future__ import annotations

import json
from typing import Iterable

from bootstrap.flux.manifest import manifest_source
from bootstrap.planning.posture.model import SECRET, Context, Outcome, Rule, ok, said

CONFIG_FILES = ("kubernetes:yaml/v2:ConfigFile", "kubernetes:yaml:ConfigFile", "kubernetes:yaml/v2:ConfigGroup")
GIT_REPOSITORY = "kubernetes:source.toolkit.fluxcd.io/v1:GitRepository"
KUSTOMIZATION = "kubernetes:kustomize.toolkit.fluxcd.io/v1:Kustomization"
K8S_SECRET = "kubernetes:core/v1:Secret"


def _flux_version(ctx: Context) -> Iterable[Outcome]:
    fx = ctx.spec.flux
    exported = ctx.runs["flux"].outputs.get("flux_version")
    for cf in ctx.of_type("flux", *CONFIG_FILES):
        source = str(cf.inputs.get("file") or cf.inputs.get("files") or "")
        pinned = source == manifest_source(ctx.spec) and (fx.manifest_path is not None
                                                           or f"/download/{fx.version}/" in source)
        yield ok(pinned and exported == fx.version, cf.name, f"controllers at {fx.version} from {source}",
                 f"controllers from {said(source)} (exported version {said(exported)}); the spec pins {fx.version}")


def _git_ref(ctx: Context) -> Iterable[Outcome]:
    ref = ctx.spec.flux.ref
    want = {k: v for k, v in (("tag", ref.tag), ("commit", ref.commit), ("branch", ref.branch)) if v}
    for repo in ctx.of_type("flux", GIT_REPOSITORY):
        spec = repo.inputs.get("spec") or {}
        got = spec.get("ref")
        same = got == want and spec.get("url") == ctx.spec.flux.repository_url
        branch_in_prod = ctx.spec.production and "branch" in (got or {})
        yield ok(same and not branch_in_prod, repo.name, f"{ctx.spec.flux.repository_url} at {said(want)}",
                 f"source {said(spec.get('url'))} at {said(got)}; the spec says {said(want)}"
                 + (" and production needs a tag or commit" if branch_in_prod else ""))


def _strip(path: object) -> str:
    text = str(path or "")
    return text[2:] if text.startswith("./") else text


def _kustomization(ctx: Context) -> Iterable[Outcome]:
    want = _strip(ctx.spec.flux_path)
    for k in ctx.of_type("flux", KUSTOMIZATION):
        spec = k.inputs.get("spec") or {}
        good = spec.get("prune") is True and _strip(spec.get("path")) == want
        yield ok(good, k.name, f"prune on at {want}",
                 f"prune {said(spec.get('prune'))} at {said(spec.get('path'))}; want prune true at {want}")


def _everything_plain(ctx: Context) -> Iterable[tuple[str, str]]:
    """(where, serialized text) for every value that is not marked secret."""
    for layer, run in ctx.runs.items():
        plain_outputs = {k: v for k, v in run.outputs.items() if k not in run.secret_outputs}
        yield f"{layer} outputs", json.dumps(plain_outputs, default=str)
        for r in run.resources:
            yield f"{layer}/{r.name}", json.dumps(r.inputs, default=str)


def _deploy_key(ctx: Context) -> Iterable[Outcome]:
    leaks = sorted({where for where, text in _everything_plain(ctx) for s in ctx.secret_values if s and s in text})
    if leaks:
        yield "fail", None, f"the deploy key appears in plain values: {', '.join(leaks)}"
    if not ctx.spec.flux.repository_url.startswith("ssh://"):
        yield "not-applicable", None, "the repository is read over HTTPS without a deploy key"
        return
    refs = {((r.inputs.get("spec") or {}).get("secretRef") or {}).get("name")
            for r in ctx.of_type("flux", GIT_REPOSITORY)}
    for secret in ctx.of_type("flux", K8S_SECRET):
        name = (secret.inputs.get("metadata") or {}).get("name")
        if name not in refs:
            continue
        data = secret.inputs.get("stringData", secret.inputs.get("data"))
        sealed = data == SECRET or (isinstance(data, dict) and data.get("identity") == SECRET)
        yield ok(sealed, secret.name, "deploy key held only as secret config",
                 "the deploy key in the Secret is not marked secret")


RULES: tuple[Rule, ...] = (
    Rule("flux-pinned-version", "flux", CONFIG_FILES,
         "the controllers are the version the spec pins", _flux_version),
    Rule("flux-git-ref", "flux", (GIT_REPOSITORY,),
         "the cluster follows the repository and ref the spec names", _git_ref),
    Rule("flux-kustomization-prune", "flux", (KUSTOMIZATION,),
         "the root Kustomization applies the spec's path and removes what Git no longer holds", _kustomization),
    Rule("flux-deploy-key-secret", "flux", (K8S_SECRET,),
         "the deploy key lives only in secret config and a Secret, never in plain values", _deploy_key),
)
