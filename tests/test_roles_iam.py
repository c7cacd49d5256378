"""`spec roles` prints, for each of the three roles, a trust policy and a permissions policy an adopter can hand to
IAM as they are: `--json` holds the inputs of `aws iam create-role`, `put-role-policy` and `attach-role-policy`
(`--cli-input-json`, the API's own shapes), which IAM (the emulator's, which checks a policy's grammar) accepts;
every action is one IAM knows and is held to a resource of the kind it takes (parliament's catalogue of AWS's
actions), and the trust policies name exactly one subject each: a pattern in `--repo`, `--branch`, `--namespace`
or the fleet's issuer is refused (exit 2), since in a StringLike condition `refs/heads/*` lets every branch in."""

from __future__ import annotations

import json
import uuid

import pytest
import yaml

from bootstrap.roles import READ_ONLY_POLICY
from tests.conftest import REPO
from tests.test_cli_errors import assert_refused, groundctl

ISSUER = "oidc.eks.eu-west-1.amazonaws.com/id/EXAMPLED539D4633E53DE1B71EXAMPLE"
GITHUB = "token.actions.githubusercontent.com"


def _roles(monkeypatch, capsys, *args: str) -> dict:
    code, out, err = groundctl(monkeypatch, capsys, "spec", "roles", *args, "--json")
    assert code == 0, err
    return {r["role"]: r for r in json.loads(out)["roles"]}


@pytest.fixture
def spec_without_roles(tmp_path):
    """The prod example under a name of its own and without role ARNs: each role gets groundctl's default name."""
    data = yaml.safe_load((REPO / "environments" / "prod.yaml").read_text())
    data["name"] = f"r{uuid.uuid4().hex[:12]}"
    for field in ("plan_role_arn", "record_role_arn", "apply_role_arn"):
        data["aws"].pop(field)
    path = tmp_path / f"{data['name']}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path, data["name"]


def test_iam_accepts_each_role_as_printed(monkeypatch, capsys, aws, spec_without_roles):
    path, env = spec_without_roles
    roles = _roles(monkeypatch, capsys, str(path), "--repo", "acme/infra", "--branch", "main",
                   "--fleet-oidc-issuer", f"https://{ISSUER}")
    iam = aws.client("iam")
    for name, role in roles.items():
        assert role["create_role"]["RoleName"] == f"groundctl-{env}-{name}"
        iam.create_role(**role["create_role"])
        iam.put_role_policy(**role["put_role_policy"])
        stored = iam.get_role(RoleName=role["create_role"]["RoleName"])["Role"]["AssumeRolePolicyDocument"]
        stored = json.loads(stored) if isinstance(stored, str) else stored
        assert stored == role["trust_policy"]
        policy = iam.get_role_policy(RoleName=role["create_role"]["RoleName"],
                                     PolicyName=role["put_role_policy"]["PolicyName"])["PolicyDocument"]
        assert (json.loads(policy) if isinstance(policy, str) else policy) == role["policy"]
        # The emulator holds no AWS managed policy to attach: the input's shape is the API's.
        assert role["attach_role_policy"] == {"RoleName": role["create_role"]["RoleName"],
                                              "PolicyArn": READ_ONLY_POLICY}


# What parliament may say and why it stands: its catalogue predates the kms:ResourceAliases condition key (AWS's
# KMS guide, "kms:ResourceAliases"); EC2 resources cannot be named before they exist, so ec2:* is held to the
# environment's region instead; a service-linked role is held to its service by a condition.
ACCEPTED = {("UNKNOWN_CONDITION_FOR_ACTION", "kms:ResourceAliases"), ("RESOURCE_STAR", "ec2:"),
            ("RESOURCE_STAR", "iam:CreateServiceLinkedRole")}


def test_every_action_is_known_to_iam_and_held_to_a_resource_of_its_kind(monkeypatch, capsys):
    from parliament import analyze_policy_string

    for name, role in _roles(monkeypatch, capsys, "prod", "--repo", "acme/infra").items():
        findings = analyze_policy_string(role["put_role_policy"]["PolicyDocument"]).findings
        left = [(f.issue, f.detail) for f in findings
                if not any(f.issue == issue and needle in str(f.detail) for issue, needle in ACCEPTED)]
        assert left == [], (name, left)


def test_the_apply_role_changes_the_environment_but_never_deletes_a_version_of_state(monkeypatch, capsys):
    roles = _roles(monkeypatch, capsys, "prod", "--repo", "acme/infra")
    actions = {a for s in roles["apply"]["policy"]["Statement"] for a in s["Action"]}
    assert {"s3:PutObject", "kms:CreateKey", "eks:CreateCluster", "iam:PassRole", "ec2:*"} <= actions
    assert not actions & {"s3:DeleteObjectVersion", "s3:DeleteBucket", "s3:*", "kms:*", "iam:*", "eks:*"}
    # Its roles are the environment's own (the layers name them `<env>-…`), and so are its buckets.
    roles_statement = next(s for s in roles["apply"]["policy"]["Statement"] if s["Sid"] == "GroundctlRoles")
    assert roles_statement["Resource"] == "arn:aws:iam::222222222222:role/prod-*"
    buckets = next(s for s in roles["apply"]["policy"]["Statement"] if s["Sid"] == "GroundctlStateBuckets")
    assert buckets["Resource"] == ["arn:aws:s3:::acme-groundctl-prod-state",
                                   "arn:aws:s3:::acme-groundctl-prod-state-replica"]


def test_each_trust_policy_names_one_subject_exactly(monkeypatch, capsys):
    roles = _roles(monkeypatch, capsys, "dev", "--repo", "acme/infra", "--branch", "trunk")
    subjects = {"plan": "repo:acme/infra:pull_request", "record": "repo:acme/infra:ref:refs/heads/trunk",
                "apply": "repo:acme/infra:environment:dev"}
    for name, role in roles.items():
        statement, = role["trust_policy"]["Statement"]  # no fleet statement without its issuer
        assert statement["Principal"] == {"Federated": f"arn:aws:iam::111111111111:oidc-provider/{GITHUB}"}
        assert statement["Action"] == "sts:AssumeRoleWithWebIdentity"
        assert statement["Condition"] == {"StringEquals": {f"{GITHUB}:aud": "sts.amazonaws.com",
                                                           f"{GITHUB}:sub": subjects[name]}}
    with_fleet = _roles(monkeypatch, capsys, "dev", "--repo", "acme/infra", "--fleet-oidc-issuer", ISSUER,
                        "--namespace", "ops")
    assert len(with_fleet["plan"]["trust_policy"]["Statement"]) == 1  # no CronJob plans
    for name in ("record", "apply"):
        fleet = with_fleet[name]["trust_policy"]["Statement"][1]
        assert fleet["Principal"] == {"Federated": f"arn:aws:iam::111111111111:oidc-provider/{ISSUER}"}
        assert fleet["Condition"] == {"StringEquals": {f"{ISSUER}:aud": "sts.amazonaws.com",
                                                       f"{ISSUER}:sub": f"system:serviceaccount:ops:dev-{name}"}}


def test_the_text_gives_each_roles_trust_and_permissions(monkeypatch, capsys):
    code, out, err = groundctl(monkeypatch, capsys, "spec", "roles", "dev", "--repo", "acme/infra")
    assert code == 0, err
    assert out.count("trust policy (create-role") == 3 and out.count("inline policy groundctl-dev-") == 3
    assert "not generated" not in out and '"Sid": "GroundctlCluster"' in out
    assert "--fleet-oidc-issuer" in out  # the record and apply roles say how to trust the fleet


@pytest.mark.parametrize("flag,value", [("--branch", "*"), ("--branch", "release-?"), ("--branch", "v[12]"),
                                        ("--repo", "acme/*"), ("--repo", "*/*"), ("--namespace", "*"),
                                        ("--fleet-oidc-issuer", "oidc.eks.eu-west-1.amazonaws.com/id/*")])
def test_a_pattern_is_refused(monkeypatch, capsys, flag, value):
    assert_refused(groundctl(monkeypatch, capsys, "spec", "roles", "dev", flag, value, "--json"), 2,
                   f"{flag} {value!r} holds a wildcard", "name one")


def test_a_role_arn_with_a_path_is_created_at_that_path(monkeypatch, capsys, tmp_path):
    data = yaml.safe_load((REPO / "environments" / "dev.yaml").read_text())
    data["aws"]["plan_role_arn"] = "arn:aws:iam::111111111111:role/ci/github/groundctl-plan"
    (tmp_path / "dev.yaml").write_text(yaml.safe_dump(data))
    plan = _roles(monkeypatch, capsys, str(tmp_path / "dev.yaml"), "--repo", "acme/infra")["plan"]
    assert (plan["create_role"]["RoleName"], plan["create_role"]["Path"]) == ("groundctl-plan", "/ci/github/")


@pytest.mark.parametrize("flag,value,needle", [("--repo", "acme", "owner/name"), ("--branch", "a b", "branch name"),
                                               ("--branch", "main:x", "branch name"),
                                               ("--fleet-oidc-issuer", "http://x y", "not an OIDC issuer")])
def test_a_value_that_names_nothing_is_refused(monkeypatch, capsys, flag, value, needle):
    assert_refused(groundctl(monkeypatch, capsys, "spec", "roles", "dev", flag, value), 2, needle)
