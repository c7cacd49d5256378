"""Pulumi's own snapshot integrity rules, applied to a `StateDoc`, reporting every violation.

The rules are those of `Snapshot.VerifyIntegrity` (pkg/resource/deploy/snapshot.go), the check the DIY
backend runs on every checkpoint it loads (pkg/backend/diy/state.go), so that a state groundctl calls
integral is one Pulumi will load, and one it refuses is one Pulumi would refuse:

- the manifest magic is sha256 of the CLI version string; both empty is accepted (old checkpoints);
- every resource has a URN and a type; a resource that is not custom has no ID;
- a provider resource is referenceable (its URN is a provider URN) and is known by `(urn, id)`, an
  empty id standing for the unknown-ID token (sdk/go/common/providers/reference.go, NewReference);
  a resource's provider reference `<urn>::<id>` is split at its last `::` and taken literally
  (ParseReference: `<urn>::` means id "", which no provider has) and must name a provider that
  appears earlier (not required while pending replacement);
- parents, dependencies, property dependencies, deletedWith and replaceWith name resources that
  appear earlier; empty strings in the dependency lists are skipped (pkg/resource/state.go,
  GetAllDependencies);
- a URN appears more than once only when all, or all but one, of its entries are `delete: true`;
- every snippet has a UUID, and no two snippets share one.

Pulumi stops at the first violation; we report all of them, because an operator choosing between
versions wants to see how damaged each one is. groundctl's own, stricter rules are labelled
`rule="groundctl"`: a checkpoint names the stack it belongs to, and that must be the stack expected;
and (in `recovery.state.state_parse`) a pending operation has a resource and an operation type.
"""

from __future__ import annotations

import functools
import hashlib
from typing import Optional

from recovery.state.state_model import Finding, Resource, StateDoc

URN_PREFIX = "urn:pulumi:"
# The id a provider without one is known by (sdk/go/common/providers/reference.go, UnknownID).
UNKNOWN_ID = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"


def new_magic(version: str) -> str:
    """Pulumi's manifest magic: sha256 of the CLI version string, or empty without a version."""
    return hashlib.sha256(version.encode("utf-8", errors="surrogatepass")).hexdigest() if version else ""


def urn_valid(urn: str) -> bool:
    return urn.startswith(URN_PREFIX) and len(urn.split("::", 3)) == 4


def urn_type(urn: str) -> str:
    """The resource type of a URN: the last `$`-separated part of its qualified type."""
    parts = urn.split("::", 3)
    return parts[2].rsplit("$", 1)[-1] if len(parts) == 4 else ""


def is_provider_type(type_token: str) -> bool:
    # A type token is <package>:<module>:<name>; providers are pulumi:providers:<package>.
    module, sep, name = type_token.rpartition(":")
    return bool(sep) and module == "pulumi:providers" and name != ""


def provider_urn_problem(urn: str) -> Optional[str]:
    if not urn_valid(urn):
        return f"'{urn}' is not a valid URN"
    if not is_provider_type(urn_type(urn)):
        return f"the type in '{urn}' is not a provider type (pulumi:providers:<package>)"
    return None


def parse_provider_reference(ref: str) -> tuple[Optional[tuple[str, str]], Optional[str]]:
    """(urn, id) of a provider reference `<urn>::<id>`, or None and why not."""
    urn, sep, pid = ref.rpartition("::")
    if not sep:
        return None, "it has no '::' between the provider URN and its ID"
    problem = provider_urn_problem(urn)
    return (None, problem) if problem else ((urn, pid), None)


def stack_matches(actual: Optional[str], expected: str) -> bool:
    """Stack names match when the shorter is a suffix of the longer, by `/` segment: `dev`,
    `network/dev` and `organization/network/dev` name the same stack (older checkpoints and
    non-project backends store the short form)."""
    if not actual:
        return False
    a, e = actual.split("/"), expected.split("/")
    n = min(len(a), len(e))
    return a[-n:] == e[-n:]


def foreign_stacks(doc: StateDoc, expected_stack: Optional[str]) -> tuple[str, ...]:
    """Every `<stack>::<project>` the state's URNs name other than the expected stack's, in first-seen order.

    A URN is `urn:pulumi:<stack>::<project>::<type>::<name>`. A state whose resources name another stack
    or project is that stack's state (copied or imported here): restored, Pulumi would manage another
    stack's resources under this one's name. Pulumi's integrity rules do not look at it. Pure."""
    if not expected_stack:
        return ()
    parts = expected_stack.split("/")
    if len(parts) < 2:
        return ()
    want = f"{parts[-1]}::{parts[-2]}"
    seen: dict[str, None] = {}
    urns = [r.urn for r in doc.resources] + [p.urn for p in doc.pending_operations]
    for urn in urns:
        if not urn or not urn.startswith(URN_PREFIX):
            continue
        stack, sep, rest = urn[len(URN_PREFIX):].partition("::")
        project = rest.partition("::")[0]
        named = f"{stack}::{project}"
        if sep and named != want:
            seen.setdefault(named)
    return tuple(seen)


def _label(r: Resource) -> str:
    return r.urn or f"the resource at index {r.index}"


def _reference_findings(r: Resource, seen: set[str], later: dict[str, int]) -> list[Finding]:
    """Parent, dependencies, property dependencies, deletedWith and replaceWith must name earlier
    resources; an empty string names nothing and is skipped, as Pulumi's GetAllDependencies does."""
    if ((not r.parent or r.parent in seen) and (not r.deleted_with or r.deleted_with in seen)
            and all(not d or d in seen for d in r.dependencies)
            and all(not d or d in seen for _, deps in r.property_dependencies for d in deps)
            and all(not d or d in seen for d in r.replace_with)):
        return []  # the common case, decided without building messages
    out: list[Finding] = []
    refs: list[tuple[str, str, str]] = []
    if r.parent:
        refs.append(("parent", r.parent, "its parent"))
    refs += [("dependency", d, "its dependency") for d in r.dependencies if d]
    refs += [("property-dependency", d, f"its dependency through property '{p}'")
             for p, deps in r.property_dependencies for d in deps if d]
    if r.deleted_with:
        refs.append(("deleted-with", r.deleted_with, "the resource it is deleted with"))
    refs += [("replace-with", d, "a resource it is replaced with") for d in r.replace_with if d]
    for kind, target, what in refs:
        if target in seen:
            continue
        if later.get(target, -1) > r.index:
            code = "parent-after-child" if kind == "parent" else f"{kind}-after-use"
            msg = (f"{_label(r)} lists {what} {target}, which comes after it in the state; Pulumi requires "
                   "every referenced resource to come first.")
        else:
            code = f"dangling-{kind}"
            msg = f"{_label(r)} lists {what} {target}, which is not in the state."
        out.append(Finding(code, r.urn or None, msg, r.index))
    return out


@functools.lru_cache(maxsize=4096)
def _parse_provider_cached(ref: str) -> tuple[Optional[tuple[str, str]], Optional[str]]:
    # A state has thousands of resources and a handful of providers: parse each reference once.
    return parse_provider_reference(ref)


def _provider_findings(r: Resource, providers: set[tuple[str, str]],
                       later_providers: dict[tuple[str, str], int]) -> list[Finding]:
    if not r.provider:
        return []
    ref, problem = _parse_provider_cached(r.provider)
    if ref is None:
        return [Finding("bad-provider-reference", r.urn or None,
                        f"{_label(r)} has provider reference '{r.provider}', which Pulumi cannot parse: "
                        f"{problem}.", r.index)]
    if ref in providers or r.pending_replacement:
        return []
    if not ref[1]:
        return [Finding("dangling-provider", r.urn or None,
                        f"{_label(r)} has provider reference '{r.provider}', whose ID is empty; Pulumi takes it "
                        f"literally, and knows a provider without an ID as '{UNKNOWN_ID}', so it names no "
                        "provider.", r.index)]
    if later_providers.get(ref, -1) > r.index:
        return [Finding("provider-after-use", r.urn or None,
                        f"{_label(r)} uses provider {r.provider}, which comes after it in the state; a "
                        "provider must come before every resource that uses it.", r.index)]
    return [Finding("dangling-provider", r.urn or None,
                    f"{_label(r)} uses provider {r.provider}, which is not in the state.", r.index)]


def verify_integrity(doc: StateDoc, expected_stack: Optional[str] = None) -> tuple[Finding, ...]:
    """Every way `doc` breaks Pulumi's integrity rules (and the stack-name rule); empty when integral."""
    findings: list[Finding] = list(doc.schema_findings)
    manifest = doc.manifest
    magic, version = (manifest.magic, manifest.version) if manifest else ("", "")
    if magic != new_magic(version):
        findings.append(Finding(
            "bad-magic", None,
            f"the manifest magic does not match its CLI version '{version}' (it should be sha256 of the "
            "version string): the file was edited by hand or damaged.", None))

    # Where each URN (and each provider reference) appears last, to tell "comes later" from "missing".
    later: dict[str, int] = {}
    later_providers: dict[tuple[str, str], int] = {}
    for r in doc.resources:
        later[r.urn] = r.index
        if is_provider_type(r.type):
            later_providers[(r.urn, r.id or UNKNOWN_ID)] = r.index

    seen: set[str] = set()
    providers: set[tuple[str, str]] = set()
    entries: dict[str, list[Resource]] = {}
    for r in doc.resources:
        if not r.urn and "urn" not in r.malformed:
            findings.append(Finding("missing-urn", None, f"the resource at index {r.index} has no URN.", r.index))
        if not r.type and "type" not in r.malformed:
            findings.append(Finding("missing-type", r.urn or None, f"{_label(r)} has no type.", r.index))
        if not r.custom and r.id:
            findings.append(Finding(
                "custom-id-on-component", r.urn or None,
                f"{_label(r)} is not a custom resource (a component or the stack) but has the cloud ID "
                f"'{r.id}'; only custom resources have IDs.", r.index))
        if is_provider_type(r.type):
            problem = provider_urn_problem(r.urn)
            if problem:
                findings.append(Finding("provider-not-referenceable", r.urn or None,
                                        f"{_label(r)} is a provider, but {problem}, so nothing can refer to it.",
                                        r.index))
            else:
                providers.add((r.urn, r.id or UNKNOWN_ID))
        findings += _provider_findings(r, providers, later_providers)
        findings += _reference_findings(r, seen, later)
        if r.urn:
            seen.add(r.urn)
            entries.setdefault(r.urn, []).append(r)

    for urn, states in entries.items():
        deletes = sum(1 for s in states if s.delete)
        if len(states) > 1 and deletes < len(states) - 1:
            findings.append(Finding(
                "duplicate-urn", urn,
                f"{urn} appears {len(states)} times and {len(states) - deletes} of them are not marked "
                "`delete: true`; only one live entry per URN is allowed.", states[-1].index))

    first: dict[str, int] = {}
    for i, uuid in enumerate(doc.snippet_uuids):
        if not uuid:
            findings.append(Finding("missing-snippet-uuid", None, f"snippet {i} has no 'uuid'.", i))
        elif uuid in first:
            findings.append(Finding("duplicate-snippet-uuid", None,
                                    f"snippets {first[uuid]} and {i} share the uuid '{uuid}'; each must be unique.", i))
        else:
            first[uuid] = i

    if expected_stack and doc.kind == "checkpoint" and not stack_matches(doc.stack, expected_stack):
        named = f"stack '{doc.stack}'" if doc.stack else "no stack"
        findings.append(Finding(
            "stack-mismatch", None,
            f"the checkpoint names {named}, but this is the state of stack '{expected_stack}' (groundctl's own "
            "rule: Pulumi does not check it, and would load this state).", None, rule="groundctl"))
    return tuple(findings)


def is_integral(findings: tuple[Finding, ...]) -> bool:
    return not findings
