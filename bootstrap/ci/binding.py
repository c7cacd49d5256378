"""The reviewed plan bound to what the reviewer saw. Pure.

Inside the plan artifact the binding is a chain: each plan file names its Pulumi saved plan by sha256, and its
fingerprint covers (URN, operation, field names). Edited together and consistently, the files still agree with
each other: a saved plan whose every value was made unknown, which Pulumi accepts for any value
(bootstrap.planning.knowledge), passes that chain. So the plan job also posts, outside the artifact, each
layer's digests in the sticky pull-request comment and the check's output: its fingerprint, its saved plan's
sha256, how many of its planned values are unknown and a digest of where. The merge job reads the digests
posted for the pull request's last commit (by the workflow's own bot, never another comment) and refuses an
artifact whose digests differ, or whose planned values are less known than the plan shown to the reviewer.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from typing import Mapping, Optional

from bootstrap.planning.knowledge import Knowledge

_HEX64 = re.compile(r"[0-9a-f]{64}")
_COMMIT = re.compile(r"[0-9a-f]{7,64}")
_LAYER = re.compile(r"[a-z][a-z0-9-]{0,40}")
MAX_LAYERS = 32


@dataclass(frozen=True)
class LayerDigest:
    fingerprint: str
    saved_plan_sha256: Optional[str]  # None: the layer's plan has no saved plan (not deployed, or skipped)
    values: int = 0  # planned input values in the saved plan
    unknown: int = 0  # how many of them are unknown until the apply
    unknown_sha256: Optional[str] = None  # a digest of where those are (URN and field path)


def layer_digest(fingerprint: str, saved_plan_sha256: Optional[str], known: Optional[Knowledge]) -> LayerDigest:
    if known is None:
        return LayerDigest(fingerprint, saved_plan_sha256)
    return LayerDigest(fingerprint, saved_plan_sha256, known.values, known.unknown_count, known.unknown_sha256)


def _marker(environment: str) -> str:
    return f"<!-- groundctl:digests:{environment} "


def block(environment: str, commit: str, digests: Mapping[str, LayerDigest]) -> str:
    """The machine-readable line the merge job reads back: an HTML comment, not shown on the page."""
    doc = {"commit": commit, "layers": {layer: asdict(d) for layer, d in sorted(digests.items())}}
    return f"{_marker(environment)}{json.dumps(doc, sort_keys=True, separators=(',', ':'))} -->"


def table(digests: Mapping[str, LayerDigest]) -> str:
    """The digests as the reviewer sees them (Markdown)."""
    rows = ["| layer | fingerprint | saved plan sha256 | planned values unknown until apply |", "|---|---|---|---|"]
    for layer, d in digests.items():
        saved = f"`{d.saved_plan_sha256}`" if d.saved_plan_sha256 else "— (no saved plan: nothing to apply)"
        unknown = f"{d.unknown} of {d.values}" if d.saved_plan_sha256 else "—"
        rows.append(f"| `{layer}` | `{d.fingerprint}` | {saved} | {unknown} |")
    return "\n".join(rows) + "\n"


@dataclass(frozen=True)
class Posted:
    commit: str
    layers: dict[str, LayerDigest]


class NotPosted(ValueError):
    """The comment holds no well-formed digests for the environment; the message says what is wrong."""


def posted(comment: str, environment: str) -> Posted:
    """The digests a sticky comment holds for `environment`; NotPosted when it has none or they are malformed."""
    marker = _marker(environment)
    lines = [line for line in comment.splitlines() if line.startswith(marker)]
    if len(lines) != 1:
        raise NotPosted("it holds no digests of a reviewed plan" if not lines else "it holds more than one set of "
                        "digests")
    body = lines[0][len(marker):]
    if not body.endswith(" -->"):
        raise NotPosted("its digests line is cut short")
    try:
        doc = json.loads(body[:-4])
    except ValueError:
        raise NotPosted("its digests are not JSON") from None
    layers = doc.get("layers") if isinstance(doc, dict) else None
    commit = doc.get("commit") if isinstance(doc, dict) else None
    if not (isinstance(commit, str) and _COMMIT.fullmatch(commit) and isinstance(layers, dict)
            and len(layers) <= MAX_LAYERS):
        raise NotPosted("its digests do not name a commit and the layers")
    found = {}
    for layer, d in layers.items():
        if not (isinstance(layer, str) and _LAYER.fullmatch(layer) and isinstance(d, dict) and _valid(d)):
            raise NotPosted(f"its digests of layer {str(layer)[:40]!r} are malformed")
        found[layer] = LayerDigest(**{k: d[k] for k in LayerDigest.__dataclass_fields__})
    return Posted(commit, found)


def _valid(d: dict) -> bool:
    def hex_or_none(value: object) -> bool:
        return value is None or (isinstance(value, str) and bool(_HEX64.fullmatch(value)))

    def count(value: object) -> bool:
        return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 1 << 40

    return (set(d) == set(LayerDigest.__dataclass_fields__) and isinstance(d["fingerprint"], str)
            and bool(_HEX64.fullmatch(d["fingerprint"])) and hex_or_none(d["saved_plan_sha256"])
            and hex_or_none(d["unknown_sha256"]) and count(d["values"]) and count(d["unknown"]))


def problems(reviewed: Posted, artifact: Mapping[str, LayerDigest], head: str) -> list[str]:
    """Why the artifact is not the plan the reviewer saw for commit `head`; empty when it is."""
    if reviewed.commit != head:
        return [f"the digests posted are of commit {reviewed.commit[:12]}, not of the pull request's last commit "
                f"{head[:12]}: the plan of the last push was never posted for review"]
    found = []
    if set(reviewed.layers) != set(artifact):
        found.append(f"the artifact holds plans of {', '.join(sorted(artifact)) or 'no layer'}, the digests posted "
                     f"name {', '.join(sorted(reviewed.layers)) or 'no layer'}")
    for layer in sorted(set(reviewed.layers) & set(artifact)):
        seen, got = reviewed.layers[layer], artifact[layer]
        if got.unknown > seen.unknown:
            found.append(f"{layer}: its saved plan leaves {got.unknown} of {got.values} planned values unknown, the "
                         f"plan shown to the reviewer {seen.unknown} of {seen.values}; an unknown value accepts any "
                         "value when the plan is applied, so this plan is less known than the one reviewed")
        elif got != seen:
            what = [name for name, a, b in (("fingerprint", seen.fingerprint, got.fingerprint),
                                            ("saved plan's sha256", seen.saved_plan_sha256, got.saved_plan_sha256),
                                            ("unknown values", (seen.values, seen.unknown_sha256),
                                             (got.values, got.unknown_sha256))) if a != b]
            found.append(f"{layer}: its {' and '.join(what)} differ from the digests posted for review (posted "
                         f"{_short(seen.saved_plan_sha256)}, artifact {_short(got.saved_plan_sha256)})")
    return found


def _short(digest: Optional[str]) -> str:
    return digest[:12] if digest else "none"
