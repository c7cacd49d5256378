"""Cluster tier, issue 27 §4: the schedules `spec check` accepts are ones a real API server accepts in a CronJob,
and where groundctl's refusal says Kubernetes would refuse a schedule, it does.

tests/test_spec_schedules.py holds groundctl's reading of both grammars (robfig/cron's, which the API server
validates a CronJob's schedule with, and cronsim's); here the API server itself is asked, with server-side dry-run
creates (nothing is stored): every accepted schedule, the CronJobs `groundctl fleet manifests` renders, and the
refused schedules whose refusal names Kubernetes as the one that refuses them.
"""

from __future__ import annotations

import pytest

from bootstrap.spec.cron import schedule_problem
from tests.kubeapi import skip_reason
from tests.test_spec_schedules import ACCEPTED, REFUSED

pytestmark = [pytest.mark.cluster, pytest.mark.skipif(bool(skip_reason()), reason=skip_reason() or "")]

CRONJOBS = "/apis/batch/v1/namespaces/default/cronjobs?dryRun=All"


def _cronjob(name: str, schedule: str) -> dict:
    return {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": name, "namespace": "default"},
            "spec": {"schedule": schedule, "timeZone": "Etc/UTC", "jobTemplate": {"spec": {"template": {"spec": {
                "restartPolicy": "Never", "containers": [{"name": "c", "image": "registry.example/x:1"}]}}}}}}


def _create(kube, body: dict) -> tuple[int, str]:
    status, doc = kube.request("POST", CRONJOBS, body)
    return status, str(doc.get("message") or "")


def test_every_schedule_groundctl_accepts_is_accepted_by_the_api_server(kube_cluster):
    answers = {s: _create(kube_cluster, _cronjob(f"accepted-{i}", s)) for i, s in enumerate(ACCEPTED)}
    assert {s: a for s, a in answers.items() if a[0] != 201} == {}


def test_the_cronjobs_fleet_manifests_renders_are_accepted_by_the_api_server(kube_cluster):
    from tests.test_fleet_manifests import IMAGE, spec_files
    from recovery.fleet import manifests as fm

    jobs = [m for m in fm.render(spec_files(), image=IMAGE).manifests if m["kind"] == "CronJob"]
    assert len(jobs) >= 3
    refused = {}
    for job in jobs:
        body = {**job, "metadata": {**job["metadata"], "namespace": "default"}}
        status, message = _create(kube_cluster, body)
        if status != 201:
            refused[job["metadata"]["name"]] = (job["spec"]["schedule"], status, message)
    assert refused == {}


KUBERNETES_REFUSES = ("Kubernetes CronJobs do not accept it", "names a time zone")


@pytest.mark.parametrize("schedule", sorted(s for s in REFUSED if schedule_problem(s).startswith(
    KUBERNETES_REFUSES) or (len(s.split()) != 5 and not s.startswith("@"))))
def test_a_schedule_refused_in_kubernetes_name_is_refused_by_the_api_server(kube_cluster, schedule):
    status, message = _create(kube_cluster, _cronjob("refused", schedule))
    assert status == 422 and "spec.schedule" in message, (schedule_problem(schedule), status, message)


@pytest.mark.parametrize("schedule", sorted(s for s in REFUSED if schedule_problem(s).startswith(
    "groundctl (cronsim) does not accept it")))
def test_a_schedule_refused_as_only_groundctls_reader_refuses_it_is_accepted_by_the_api_server(kube_cluster,
                                                                                               schedule):
    """`?` and `*-5` were refused as Kubernetes' refusals; the API server takes them (robfig reads them as `*`)."""
    assert _create(kube_cluster, _cronjob("reader-only", schedule))[0] == 201
