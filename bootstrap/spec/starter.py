"""What `groundctl init` writes into an adopter's repository: a first spec made from one of groundctl's bundled
examples with the adopter's name, region and account, and the places the rest of the repository goes. Pure: the
front door reads the examples, checks the files and writes.

The spec is the example's text with its facts replaced line by line, so its comments (why a field is what it is)
stay for the adopter to read."""

from __future__ import annotations

import re
from dataclasses import dataclass

import yaml

REQUIREMENTS_IN = "groundctl-requirements.in"
REQUIREMENTS_TXT = "groundctl-requirements.txt"
WHEEL_DIR = "vendor"
MANIFEST_DIR = "manifests"
# Flags the spec fields come from, to name in a message about the spec init would write.
FLAGS = {"name": "--name", "aws.region": "--region", "aws.account_id": "--account"}


class StarterProblem(ValueError):
    """The example cannot be made into the asked-for spec; the message says why."""


@dataclass(frozen=True)
class Facts:
    name: str
    region: str
    account: str


def bucket_name(facts: Facts) -> str:
    """A state bucket name of the adopter's own (bucket names are global: the account keeps it theirs)."""
    return f"groundctl-{facts.name}-state-{facts.account}"


def first_spec(example_text: str, example: str, facts: Facts) -> str:
    """The example's text as the spec of `facts`: its name, region, account (everywhere, in its ARNs too), its
    own state bucket and key alias, and a first line saying where it came from."""
    data = yaml.safe_load(example_text)
    old_account = str(data["aws"]["account_id"])
    text = example_text.replace(old_account, facts.account)
    for pattern, line in ((r"^name: .*$", f"name: {facts.name}"),
                          (r"^  region: .*$", f"  region: {facts.region}"),
                          (r"^  bucket: .*$", f"  bucket: {bucket_name(facts)}"),
                          (r"^  kms_alias: .*$", f"  kms_alias: alias/groundctl-{facts.name}-state")):
        text, count = re.subn(pattern, line, text, count=1, flags=re.M)
        if count != 1:
            raise StarterProblem(f"the example {example!r} has no line {pattern!r} to fill in")
    body = text.split("\n")
    while body and body[0].startswith("#"):
        body.pop(0)
    head = (f"# {facts.name}: started by `groundctl init` from groundctl's example spec '{example}'. Review every\n"
            "# field before the first plan (the spec reference: docs/spec.md), above all the Flux repository, the\n"
            "# cluster's admins and public access, and the role ARNs (`groundctl spec roles "
            f"{facts.name}` prints their policies).\n")
    return head + "\n".join(body)


def requirements_in(version: str) -> str:
    """The requirements input naming the committed wheel of the running groundctl."""
    return (f"# groundctl and what it needs, compiled with every hash into {REQUIREMENTS_TXT}:\n"
            f"#   pip-compile --generate-hashes --output-file {REQUIREMENTS_TXT} {REQUIREMENTS_IN}\n"
            f"# The wheel is committed beside it, in {WHEEL_DIR}/ (the workflows install from those two files).\n"
            f"./{WHEEL_DIR}/{wheel_file(version)}\n")


def wheel_file(version: str) -> str:
    return f"groundctl-{version}-py3-none-any.whl"


PLACES = {
    f"{WHEEL_DIR}/README.md": (
        "# groundctl's wheel\n\n"
        "The groundctl wheel this repository runs, committed: `{requirements_in}` names it, and `{requirements_txt}`\n"
        "(compiled from it with every hash) is what the workflows install with `pip install --require-hashes`.\n"
        "An upgrade replaces the wheel and compiles the file again, in one pull request: that change plans every\n"
        "environment.\n"),
    f"{MANIFEST_DIR}/README.md": (
        "# Flux install manifests\n\n"
        "The fleet's pods have no network: `groundctl pins update` writes each spec's Flux install manifest here\n"
        "(`install.yaml` of its `flux.version` as `flux-v<version>.yaml`), checked against the digest it records in\n"
        "the pins lock. Specs read it through the lock, `groundctl fleet manifests` mounts it; commit it with the lock.\n"),
}


def places() -> dict[str, str]:
    """The folders the repository's other files go in, each with a note saying what goes there."""
    return {path: text.format(requirements_in=REQUIREMENTS_IN, requirements_txt=REQUIREMENTS_TXT)
            for path, text in PLACES.items()}
