"""Judging and waiting for Flux Ready against an in-test Kubernetes API double (unit tier), and the plain HTTP
client.

The same module against a real API server (GitRepositories and Kustomizations written by the API, their
status through the status subresource) is tests/test_cluster_tier_ready.py.
"""

from __future__ import annotations

import base64
import json

import pytest

from bootstrap.flux.ready import Install, assess, compare_revisions, judge_install, names_ref
from bootstrap.flux.status import KUSTOMIZATIONS_PATH, parse_controllers, parse_kustomizations
from bootstrap.flux.wait import backoff_delays, list_kustomizations, observe, wait_ready
from bootstrap.kube.api import HttpKubeApi, KubeApiError, api_from_kubeconfig, eks_token, parse_kubeconfig
from tests.fakes.clock import FakeClock
from tests.fakes.k8s import (CONTROLLERS, FakeKubeApi, deployment, flux_up, git_repository, kustomization,
                             serve_http)

TOKEN = "canary-token-7d1f0c2e9b"


def test_parse_reads_ready_condition_revisions_and_generation():
    doc = {"items": [kustomization("apps", revision="main@sha1:111"),
                     kustomization("infra", ready="False", reason="BuildFailed", message="kustomize build failed",
                                   revision="main@sha1:000", generation=3, observed=2),
                     "not an object"]}
    apps, infra = parse_kustomizations(doc)
    assert (apps.key, apps.ready, apps.last_applied_revision) == ("flux-system/apps", "True", "main@sha1:111")
    assert (infra.ready, infra.reason, infra.message) == ("False", "BuildFailed", "kustomize build failed")
    assert infra.up_to_date is False and apps.up_to_date is True


def test_assess_waits_for_missing_not_ready_and_stale_generation_and_stops_on_stalled():
    items = parse_kustomizations({"items": [kustomization("apps")]})
    assert assess(items, {"flux-system/apps": None}).outcome == "ready"
    waiting = assess(items, {"flux-system/apps": None, "flux-system/infra": None})
    assert (waiting.outcome, waiting.reason) == ("waiting", "Missing") and "flux-system/infra" in waiting.message
    lagging = parse_kustomizations({"items": [kustomization("apps", generation=2, observed=1)]})
    assert assess(lagging).outcome == "waiting"
    stalled = parse_kustomizations({"items": [kustomization("apps", ready="False", reason="ArtifactFailed",
                                                            stalled=True)]})
    result = assess(stalled)
    assert (result.outcome, result.reason) == ("stalled", "Stalled") and "ArtifactFailed" in result.message
    assert assess(()).reason == "NoKustomizations"


def test_compare_revisions_names_missing_and_moved_and_tolerates_extra():
    base = {"flux-system/apps": "main@sha1:1", "flux-system/infra": "main@sha1:2"}
    assert compare_revisions(base, dict(base) | {"flux-system/new": "x"}).same
    check = compare_revisions(base, {"flux-system/apps": "main@sha1:9"})
    assert not check.same and check.missing == ("flux-system/infra",)
    assert check.changed == (("flux-system/apps", "main@sha1:1", "main@sha1:9"),)
    assert "main@sha1:1 → main@sha1:9" in check.message


def test_backoff_grows_caps_and_jitters_within_bounds():
    plain = backoff_delays(initial=1, factor=2, maximum=8, jitter=0, rand=lambda: 0.5)
    assert [next(plain) for _ in range(6)] == [1, 2, 4, 8, 8, 8]
    low = backoff_delays(initial=10, jitter=0.2, rand=lambda: 0.0)
    high = backoff_delays(initial=10, jitter=0.2, rand=lambda: 1.0)
    assert next(low) == pytest.approx(8.0) and next(high) == pytest.approx(12.0)


def test_wait_ready_polls_with_backoff_until_ready_riding_out_api_errors():
    api, clock = FakeKubeApi(), FakeClock()
    api.errors = [KubeApiError(None, "connection refused")]

    def on_poll(n: int) -> None:
        api.items = [kustomization("apps", ready="True" if n >= 4 else "Unknown", reason="Progressing")]
    api.on_poll = on_poll
    result = wait_ready(api, timeout_seconds=600, expected={"flux-system/apps": "main@sha1:abc123"}, clock=clock,
                        sleep=clock.sleep, delays=backoff_delays(initial=2, jitter=0))
    assert result.outcome == "ready" and result.polls == 4
    assert clock.sleeps == [2, 4, 8] and result.seconds == 14
    assert result.revisions == {"flux-system/apps": "main@sha1:abc123"}
    assert api.polls == [KUSTOMIZATIONS_PATH] * 4


def test_wait_ready_is_bounded_by_the_timeout_and_reports_the_last_error():
    api, clock = FakeKubeApi(), FakeClock()
    api.errors = [KubeApiError(503, "the server is currently unable to handle the request")] * 100
    result = wait_ready(api, timeout_seconds=60, clock=clock, sleep=clock.sleep,
                        delays=backoff_delays(initial=5, jitter=0))
    assert result.outcome == "timeout" and result.reason == "Timeout"
    assert result.seconds == 60 and sum(clock.sleeps) == 60  # the last sleep is cut to the time left
    assert "503" in result.message and "unable to handle" in result.last_error


def test_wait_ready_stops_at_once_when_a_kustomization_is_stalled():
    api, clock = FakeKubeApi([kustomization("apps", ready="False", reason="HealthCheckFailed", stalled=True)]), FakeClock()
    result = wait_ready(api, timeout_seconds=600, clock=clock, sleep=clock.sleep)
    assert (result.outcome, result.polls, clock.sleeps) == ("stalled", 1, [])


def _kubeconfig(server: str, *, token: str | None = None, ca: str | None = None) -> str:
    user = {"token": token} if token else {"exec": {"apiVersion": "client.authentication.k8s.io/v1beta1",
                                                    "command": "aws", "args": ["eks", "get-token", "--cluster-name",
                                                                               "local-cluster", "--region", "eu-west-1",
                                                                               "--output", "json"]}}
    cluster = {"server": server}
    if ca:
        cluster["certificate-authority-data"] = base64.b64encode(ca.encode()).decode()
    return json.dumps({"apiVersion": "v1", "kind": "Config", "current-context": "c",
                       "clusters": [{"name": "c", "cluster": cluster}],
                       "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
                       "users": [{"name": "u", "user": user}]})


def test_parse_kubeconfig_reads_the_clusters_exec_form_without_running_it():
    target = parse_kubeconfig(_kubeconfig("https://abc.eks.amazonaws.com/", ca="PEM"))
    assert target.server == "https://abc.eks.amazonaws.com" and target.ca_pem == "PEM"
    assert (target.eks_cluster, target.region, target.token) == ("local-cluster", "eu-west-1", None)
    with pytest.raises(Exception) as err:
        parse_kubeconfig("[1, 2]")
    assert "kubeconfig cannot be used" in str(err.value)


def test_eks_token_is_a_presigned_sts_url_bound_to_the_cluster():
    import boto3

    session = boto3.Session(aws_access_key_id="AKIDEXAMPLE", aws_secret_access_key="s3cr3t-example",
                            region_name="eu-west-1")
    token = eks_token("local-cluster", "eu-west-1", session)
    assert token.startswith("k8s-aws-v1.")
    url = base64.urlsafe_b64decode(token[len("k8s-aws-v1."):] + "==").decode()
    assert url.startswith("https://sts.eu-west-1.amazonaws.com/?Action=GetCallerIdentity")
    assert "x-k8s-aws-id" in url and "s3cr3t-example" not in url


def test_http_client_lists_kustomizations_with_the_bearer_token_over_a_socket():
    api = FakeKubeApi([kustomization("apps", revision="v1.2.3@sha1:fe")])
    with serve_http(api, TOKEN) as url:
        client = api_from_kubeconfig(_kubeconfig(url, token=TOKEN))
        items = list_kustomizations(client)
        assert [(k.key, k.last_applied_revision) for k in items] == [("flux-system/apps", "v1.2.3@sha1:fe")]
        wrong = api_from_kubeconfig(_kubeconfig(url, token="not-the-token"))
        with pytest.raises(KubeApiError) as err:
            list_kustomizations(wrong)
    assert err.value.status == 401 and "Unauthorized" in str(err.value)
    assert TOKEN not in repr(client.target) and "not-the-token" not in str(err.value)


def test_http_client_reports_an_unreachable_api_without_raising_anything_else():
    client = HttpKubeApi(parse_kubeconfig(_kubeconfig("http://127.0.0.1:9", token=TOKEN)), timeout=2)
    with pytest.raises(KubeApiError) as err:
        client.get_json(KUSTOMIZATIONS_PATH)
    assert err.value.status is None and TOKEN not in str(err.value)


def test_a_stale_ready_condition_says_which_generation_flux_has_not_observed():
    api = FakeKubeApi([kustomization("apps", generation=3, observed=2)])
    result = observe(api)
    assert (result.outcome, result.reason) == ("waiting", "NotReady")
    assert "not yet observed at generation 3 (Flux last reconciled generation 2)" in result.message


def test_a_kustomization_waiting_on_its_source_names_the_sources_reason():
    waiting = kustomization("apps", ready="False", reason="ArtifactFailed", message="Source is not ready")
    waiting["spec"]["sourceRef"] = {"kind": "GitRepository", "name": "flux-system"}
    source = kustomization("flux-system", ready="False", reason="GitOperationFailed", message="auth failed")
    api = FakeKubeApi([waiting])
    api.sources = [source]
    result = observe(api)
    assert "its GitRepository flux-system/flux-system is Ready=False (GitOperationFailed: auth failed)" in result.message


def test_an_api_without_flux_kinds_is_flux_not_installed_not_an_api_failure():
    api = FakeKubeApi()
    api.errors = [KubeApiError(404, "the server could not find the requested resource")]
    result = observe(api)
    assert (result.outcome, result.reason) == ("waiting", "FluxNotInstalled")


# -- the install the flux layer made: controllers, root source and Kustomization at the spec's ref -----

ROOT = Install("flux-system", "flux-system/flux-system", "flux-system/flux-system", "tag", "v1.2.3")
AT_TAG = "v1.2.3@sha1:" + "a" * 40


def _judge(*, controllers=None, sources=None, items=None, install=ROOT):
    up = flux_up(AT_TAG)
    return judge_install(install, parse_controllers({"items": up["deployments"] if controllers is None else controllers}),
                         parse_kustomizations({"items": up["items"] if items is None else items}),
                         parse_kustomizations({"items": up["sources"] if sources is None else sources}))


def test_a_revision_names_its_ref_as_flux_writes_it():
    commit = "0123456789abcdef0123456789abcdef01234567"
    assert names_ref(AT_TAG, "tag", "v1.2.3") and not names_ref(AT_TAG, "tag", "v1.2")
    assert names_ref("release/1.x@sha1:" + "b" * 40, "branch", "release/1.x")
    assert names_ref(f"sha1:{commit}", "commit", commit) and names_ref(f"main@sha1:{commit}", "commit", commit)
    assert not names_ref("sha1:" + "f" * 40, "commit", commit)
    assert not names_ref(None, "tag", "v1.2.3") and not names_ref("", "branch", "main")


def test_the_install_is_ready_only_with_controllers_available_and_the_root_at_the_ref():
    ready = _judge()
    assert (ready.outcome, ready.reason) == ("ready", "Ready")
    assert ready.message == f"4 controller(s) available; the root Kustomization flux-system/flux-system Ready at {AT_TAG}"
    assert [c.name for c in ready.controllers] == list(CONTROLLERS)


def test_controllers_that_are_not_available_are_named_with_the_deployments_reason():
    down = [deployment("source-controller"), deployment("kustomize-controller", available=False),
            deployment("helm-controller", available=False, reason="ProgressDeadlineExceeded",
                       message='ReplicaSet "helm-controller-5d8" has timed out progressing.')]
    result = _judge(controllers=down)
    assert (result.outcome, result.reason) == ("waiting", "ControllersUnavailable")
    assert result.message.startswith("controller(s) not available: helm-controller (0 of 1 replica(s) available; "
                                     'ProgressDeadlineExceeded: ReplicaSet "helm-controller-5d8" has timed out')
    assert ("kustomize-controller (0 of 1 replica(s) available; MinimumReplicasUnavailable: Deployment does not "
            "have minimum availability.)") in result.message
    assert "source-controller" not in result.message
    assert _judge(controllers=[]).reason == "NoControllers"
    elsewhere = [deployment(n, namespace="other") for n in CONTROLLERS]
    assert _judge(controllers=elsewhere).reason == "NoControllers"  # only the install's namespace counts


def test_a_rollout_is_complete_only_as_kubectl_rollout_status_decides():
    def one(spec: dict, status: dict, generation: int = 1):
        doc = {"metadata": {"name": "c", "namespace": "flux-system", "generation": generation}, "spec": spec,
               "status": status}
        return parse_controllers({"items": [doc]})[0]
    done = {"observedGeneration": 1, "replicas": 2, "updatedReplicas": 2, "availableReplicas": 2}
    assert one({"replicas": 2}, done).available
    assert one({"replicas": 2}, done, generation=2).why == "its spec is not yet observed by the cluster"
    assert one({"replicas": 2}, done | {"replicas": 3}).why == "1 old replica(s) pending termination"
    assert one({"replicas": 3}, done).why == "2 of 3 replica(s) updated"
    assert one({"replicas": 0}, {"observedGeneration": 1}).why == "it is scaled to zero replicas"
    assert one({}, {"observedGeneration": 1}).why == "0 of 1 replica(s) updated"  # replicas defaults to 1


def test_the_root_source_and_kustomization_are_judged_with_fluxs_own_reason():
    failing = _judge(sources=[git_repository(ready="False", reason="GitOperationFailed", revision=None,
                                             message="failed to checkout and determine revision: auth required")])
    assert (failing.outcome, failing.reason) == ("waiting", "GitOperationFailed")
    assert ("the root GitRepository flux-system/flux-system is Ready=False (GitOperationFailed: failed to checkout "
            "and determine revision: auth required)") in failing.message
    build = _judge(items=[kustomization("flux-system", ready="False", reason="BuildFailed", revision=None,
                                        message="kustomize build failed: './clusters/prod' not found")])
    assert (build.outcome, build.reason) == ("waiting", "BuildFailed")
    assert "the root Kustomization flux-system/flux-system is Ready=False (BuildFailed: kustomize build" in build.message
    assert _judge(items=[]).reason == "Missing" and "does not exist" in _judge(sources=[]).message
    lagging = _judge(items=[kustomization("flux-system", revision=AT_TAG, generation=2, observed=1)])
    assert lagging.reason == "NotObserved" and "not yet observed at generation 2" in lagging.message


def test_the_root_must_be_at_a_revision_of_the_spec_ref_and_at_what_its_source_fetched():
    other_tag = "v1.2.2@sha1:" + "c" * 40
    old = _judge(sources=[git_repository(revision=other_tag)], items=[kustomization("flux-system", revision=other_tag)])
    assert (old.outcome, old.reason) == ("waiting", "RevisionMismatch")
    assert f"has fetched {other_tag}, not a revision of the tag v1.2.3" in old.message
    branch = Install("flux-system", "flux-system/flux-system", "flux-system/flux-system", "branch", "main")
    fetched, applied = "main@sha1:" + "d" * 40, "main@sha1:" + "e" * 40
    behind = _judge(install=branch, sources=[git_repository(revision=fetched)],
                    items=[kustomization("flux-system", revision=applied)])
    assert behind.reason == "RevisionMismatch" and f"has applied {applied}, its source has fetched {fetched}" in behind.message


def test_a_suspended_or_stalled_root_is_terminal():
    suspended = _judge(items=[kustomization("flux-system", revision=AT_TAG, suspend=True)])
    assert (suspended.outcome, suspended.reason) == ("stalled", "Suspended")
    stalled = _judge(items=[kustomization("flux-system", ready="False", reason="HealthCheckFailed", stalled=True,
                                          message="timeout waiting for: [Deployment/apps/web status: 'InProgress']")])
    assert (stalled.outcome, stalled.reason) == ("stalled", "HealthCheckFailed") and "will not retry" in stalled.message
    both = _judge(controllers=[deployment("source-controller", available=False)],
                  items=[kustomization("flux-system", revision=AT_TAG, suspend=True)])
    assert both.reason == "Suspended" and both.message.startswith("controller(s) not available")  # cause first


def test_flux_messages_are_clipped_before_they_reach_a_record():
    huge = "x" * 20_000
    (item,) = parse_kustomizations({"items": [kustomization("apps", ready="False", reason="BuildFailed", message=huge)]})
    assert len(item.message) < 400 and "more characters" in item.message


def test_waiting_for_the_install_reads_controllers_and_sources_and_ends_at_the_deadline():
    api, clock = FakeKubeApi().set_flux(**flux_up(AT_TAG)), FakeClock()
    api.items = [kustomization("flux-system", ready="False", reason="BuildFailed", message="no such path", revision=None)]
    result = wait_ready(api, timeout_seconds=120, install=ROOT, clock=clock, sleep=clock.sleep,
                        delays=backoff_delays(initial=5, jitter=0))
    assert (result.outcome, result.reason, result.last_reason) == ("timeout", "Timeout", "BuildFailed")
    assert result.seconds == 120 and sum(clock.sleeps) == 120
    assert "not Ready after 120 s: the root Kustomization flux-system/flux-system is Ready=False (BuildFailed" in result.message
    assert "/apis/apps/v1/namespaces/flux-system/deployments" in api.paths
    assert result.to_dict()["controllers"][0] == {"key": "flux-system/helm-controller", "available": True,
                                                  "why": "available"}


def test_with_an_install_and_a_baseline_both_must_be_ready():
    api = FakeKubeApi().set_flux(**flux_up(AT_TAG))
    api.items.append(kustomization("apps", ready="Unknown", reason="Progressing", revision=None))
    waiting = observe(api, {"flux-system/flux-system": AT_TAG, "flux-system/apps": AT_TAG}, ROOT)
    assert (waiting.outcome, waiting.reason) == ("waiting", "NotReady") and "flux-system/apps" in waiting.message
    api.items[-1] = kustomization("apps", revision=AT_TAG)
    ready = observe(api, {"flux-system/flux-system": AT_TAG, "flux-system/apps": AT_TAG}, ROOT)
    assert ready.outcome == "ready" and "4 controller(s) available" in ready.message and len(ready.controllers) == 4
