"""Waiting for Flux Ready against an in-test Kubernetes API double (unit tier), and the plain HTTP client.

The same module against a real API server (GitRepositories and Kustomizations written by the API, their
status through the status subresource) is tests/test_cluster_tier_ready.py.
"""

from __future__ import annotations

import base64
import json

import pytest

from recovery.drills.flux_ready import (KUSTOMIZATIONS_PATH, assess, backoff_delays, compare_revisions,
                                        list_kustomizations, observe, parse_kustomizations, wait_ready)
from recovery.drills.kube_api import HttpKubeApi, KubeApiError, api_from_kubeconfig, eks_token, parse_kubeconfig
from tests.fakes.clock import FakeClock
from tests.fakes.k8s import FakeKubeApi, kustomization, serve_http

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
