"""Fixtures shared by every tier. The emulator is started here, by the tests themselves."""

from __future__ import annotations

import itertools
import os
import shutil
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from bootstrap.aws.clients import AwsClients
from bootstrap.spec import load_spec
from tests.plugin_releases import STAND_IN_FAILURE  # noqa: F401 - what the stand-in CLI says to anything else

# pytest imports readline before this file (_pytest/capture.py), and GNU readline exports COLUMNS=80 and LINES=24
# into the C environment, unseen by os.environ: every process started without env= inherits them, an xdist worker
# among them (there os.environ has them), whose groundctl then wraps its lines and tables at 80 columns where one
# run by hand without a terminal does not (bootstrap/kit/console.py). What the user did not set is taken back out here,
# before the workers start.
for _name in ("COLUMNS", "LINES"):
    if _name not in os.environ:
        os.unsetenv(_name)

REPO = Path(__file__).resolve().parent.parent
# Real state files recorded by Pulumi runs of other projects; tests/data/pulumi-states/README.md names each source.
STATES = REPO / "tests" / "data" / "pulumi-states"

# No test may reach a real AWS account by accident.
os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
os.environ.pop("AWS_PROFILE", None)
os.environ["AWS_EC2_METADATA_DISABLED"] = "true"
# Nor may the engine fetch anything: without this every preview, up and destroy of a program run under the
# test interpreter tries to download the aws and kubernetes provider plugins its installed SDKs name, and
# spends ~2.5 s of retries failing offline (pkg/engine/plugins.go: ensurePluginsAreInstalled).
os.environ.setdefault("PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION", "true")


@pytest.fixture(scope="session")
def emulator_endpoint():
    """A moto server over HTTP on a free loopback port, for the whole test session."""
    from bootstrap.aws.emulator import Emulator

    emu = Emulator()
    endpoint = emu.start()
    _warm(endpoint)
    yield endpoint
    emu.stop()


def _warm(endpoint: str) -> None:
    """moto builds a region's backends (EC2's default VPC, AMIs, instance types …) on the first call that needs
    them: the Tagging API's first GetResources took 25-35 s at a load of 35, past the 15 s read timeout of the
    test that happened to make it (a recovery's reconcile phase). Paid once here, where nothing has a deadline."""
    import boto3
    from botocore.config import Config

    config = Config(read_timeout=600, retries={"total_max_attempts": 1})
    for service, call in (("resourcegroupstaggingapi", "get_resources"), ("ec2", "describe_vpcs"),
                          ("iam", "list_roles"), ("eks", "list_clusters")):
        client = boto3.client(service, endpoint_url=endpoint, region_name="us-east-1", config=config,
                              aws_access_key_id="testing", aws_secret_access_key="testing")
        getattr(client, call)()


@pytest.fixture(autouse=True)
def _signal_handlers():
    """A test that runs `groundctl.main` in this process installs groundctl's SIGINT and SIGTERM handlers in it;
    they are put back after the test, so Ctrl-C (or a CI runner's SIGTERM) still stops pytest."""
    saved = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    yield
    for signum, handler in saved.items():
        if signal.getsignal(signum) is not handler:
            signal.signal(signum, handler)


@pytest.fixture
def aws(emulator_endpoint) -> AwsClients:
    return AwsClients("us-east-1", emulator_endpoint, credentials={
        "aws_access_key_id": "testing", "aws_secret_access_key": "testing"})


@pytest.fixture
def bucket(aws) -> str:
    """A fresh versioned bucket in the emulator, unique to the test."""
    name = f"t-{uuid.uuid4().hex[:20]}"
    s3 = aws.client("s3")
    s3.create_bucket(Bucket=name)
    s3.put_bucket_versioning(Bucket=name, VersioningConfiguration={"Status": "Enabled"})
    return name


@pytest.fixture
def local_spec(emulator_endpoint):
    """The shipped local spec, pointed at the test emulator, with a unique bucket."""
    spec = load_spec("local")
    backend = spec.backend.model_copy(update={"bucket": f"gl-{uuid.uuid4().hex[:16]}"})
    aws_spec = spec.aws.model_copy(update={"endpoint_url": emulator_endpoint})
    return spec.model_copy(update={"backend": backend, "aws": aws_spec})


def pulumi_binary() -> str | None:
    return shutil.which("pulumi")


requires_pulumi = pytest.mark.skipif(
    pulumi_binary() is None,
    reason="needs the Pulumi CLI (`pulumi` on PATH); install it from https://www.pulumi.com/docs/install/",
)


@pytest.fixture
def local_spec_file(tmp_path, bucket) -> Path:
    """The shipped local spec (embedded emulator) as a file whose state bucket is `bucket`."""
    return local_spec_with_bucket(tmp_path, bucket)


def local_spec_with_bucket(folder: Path, bucket: str) -> Path:
    """The shipped local spec written into `folder` with `bucket` as its state bucket (which may not exist)."""
    import yaml

    data = yaml.safe_load((REPO / "environments" / "local.yaml").read_text())
    data["backend"]["bucket"] = bucket
    path = folder / "local-test.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


_COLLECTED = pytest.StashKey[int]()
_collected = itertools.count()


def pytest_itemcollected(item):
    item.stash[_COLLECTED] = next(_collected)  # the file order, which a shuffled run (pytest-randomly) changes


def pytest_collection_modifyitems(items):
    """After the shuffle (pytest-randomly's hook runs first): the engine and cluster tiers build one environment
    per module, test after test (what one leaves for the next is in `tier.notes`), so their tests keep their file
    order wherever their module lands. Tests marked `last` wait for work a session fixture started early (a slow
    wait that runs alongside the other tests): they run after every other test, in their collected order; under
    xdist (--dist loadfile) a file is one unit of work, so they run after every other test of their file, on the
    worker whose session fixture it was."""
    tiers: dict = {}
    for i, item in enumerate(items):
        if item.get_closest_marker("engine") or item.get_closest_marker("cluster"):
            tiers.setdefault(item.path, []).append(i)
    for places in tiers.values():
        in_order = sorted((items[i] for i in places), key=lambda item: item.stash[_COLLECTED])
        for i, item in zip(places, in_order):
            items[i] = item
    items.sort(key=lambda item: item.get_closest_marker("last") is not None)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config):
    """`-n auto` (pyproject's addopts): one test file runs in this process, as before xdist; a worker's start-up
    (its imports, its own emulator) would only add to it, and loadfile gives a file to one worker anyway. More
    files: one worker per core and one more, unless PYTEST_XDIST_AUTO_NUM_WORKERS says. Many tests wait rather
    than compute (a deadline run out, a storm waited through, a signalled process): the extra worker's files use
    the core such a wait leaves idle. On 2 cores at a load of 0.6, 3 workers ran the suite in 270 s, 2 in 367 s."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None
    files = {arg.split("::", 1)[0] for arg in config.args}
    if len(files) == 1 and Path(config.invocation_params.dir, *files).is_file():
        return 0
    return auto_workers()


def auto_workers() -> int:
    """The workers `-n auto` starts for the suite: the cores this process may run on, and one more."""
    return len(os.sched_getaffinity(0)) + 1


def pytest_terminal_summary(terminalreporter, config):
    # pytest-randomly names its seed in the header, which -q hides: a failure that depends on the order needs it.
    seed = getattr(config.option, "randomly_seed", None)
    if config.pluginmanager.hasplugin("randomly") and isinstance(seed, int):
        terminalreporter.write_line(f"shuffled with --randomly-seed={seed} (repeat the order with that option; "
                                    "-p no:randomly runs each file's tests in order)")


@pytest.fixture(scope="session")
def kube_cluster(tmp_path_factory):
    """The cluster tier's API server (tests/kubeapi.py): one per session, so one per xdist worker that runs a
    cluster file (its own ports and folder), skipped with the reason when a binary is absent, stopped at the end
    (and with the test process, however it ends)."""
    from tests.kubeapi import skip_reason, start_cluster

    reason = skip_reason()
    if reason:
        pytest.skip(reason)
    cluster = start_cluster(tmp_path_factory.mktemp("kube"))
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def release_mirror(tmp_path_factory):
    """A local release mirror of groundctl's pinned CLI and plugins and the specs' Flux releases, in the
    publishers' formats, served over HTTP for the session (tests/plugin_releases.py); `.lock(repo)` writes a
    repository's pins lock from it with groundctl's own `update_pins`. The kubernetes plugin's tarball holds the
    real plugin only where the real CLI is on PATH, the one case in which a test can run it: packing it costs
    seconds per worker that the default suite would spend for nothing."""
    from tests.plugin_releases import served

    real = ("kubernetes",) if pulumi_binary() else ()
    with served(tmp_path_factory.mktemp("release-mirror") / "mirror", real=real) as releases:
        yield releases


def engine_stand_in(folder: Path, layers: list[str]) -> dict:
    """Environment variables for a `pulumi` that answers only `version` (at the pinned release) and `plugin
    install`, with the provider plugins `layers` need installed through it by groundctl's checked install (a
    tarball made here and served by a local mirror, its sha256 checked against the lock's): enough for
    groundctl's engine check, made before its first write, to pass, so a run goes on to write; every later step
    that needs the engine fails (exit 1 from the CLI, exit 4 from groundctl), as it would with a broken one.
    Nothing is downloaded from the internet or built."""
    from bootstrap.engine.plugins import layer_plugins
    from bootstrap.layers import STACKS_DIR
    from tests.plugin_releases import install, served, stand_in_cli

    bin_dir, home = folder / "stand-in-bin", folder / "stand-in-pulumi-home"
    cli = stand_in_cli(bin_dir)
    needed = {p.name for layer in layers for p in layer_plugins(STACKS_DIR, layer, str(STACKS_DIR.parent))}
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "PULUMI_HOME": str(home),
           "PULUMI_CONFIG_PASSPHRASE": "stand-in-passphrase"}
    repo = folder / "stand-in-repository"
    (repo / "environments").mkdir(parents=True, exist_ok=True)
    with served(folder / "stand-in-mirror", real=()) as releases:
        entries = [e for e in releases.entries(repo) if e.name.removeprefix("pulumi-resource-") in needed]
        install(cli, entries, {**os.environ, **env})
    return env


# Real pids for the lock-liveness tests (tests/test_locks.py, tests/test_pulumi_locks.py).
@pytest.fixture
def dead_pid():
    """A pid that existed on this host and is gone now: a process that ran and was reaped."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


@pytest.fixture
def newcomer():
    """A process started now: whatever pid it has, a lock naming that pid from days ago was not its."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    yield proc.pid
    proc.kill()
    proc.wait()


@pytest.fixture(scope="session")
def seeded_fleet(emulator_endpoint):
    """The 50-environment fleet of tests/fleetseed.py seeded into the emulator and read by `fleet status`'s own
    code: (report, {name: the level its story calls for}). Seeding it is ~2,000 requests (~20 s of CPU), so the
    modules that only read it (the findings and the browser tests) share one; each takes its own copy."""
    import time
    import uuid

    from bootstrap.aws.objectstore import ObjectStore
    from recovery.evidence.reading import Source, read_fleet
    from recovery.fleet.status import fleet_report
    from tests.fleetseed import seed_fleet

    s3 = AwsClients("us-east-1", emulator_endpoint, credentials={
        "aws_access_key_id": "testing", "aws_secret_access_key": "testing"}).client("s3")
    now = time.time()
    specs, expected = seed_fleet(s3, emulator_endpoint, now, f"sf-{uuid.uuid4().hex[:8]}")
    sources = [Source(spec, ObjectStore(s3, spec.backend.bucket), s3) for spec in specs.values()]
    return fleet_report(read_fleet(sources, workers=8), specs, now + 60), expected
