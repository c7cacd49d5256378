"""`groundctl ci init` accepts the requirements file the README's recipe really produces, and the install step the
workflows run installs from it on a runner, where the compiling machine's paths do not exist:

- what `pip-compile --generate-hashes` writes (tests/data/ci, recorded): the committed wheel as an absolute `file://`
  URL of the compiling machine, and an option line (`--find-links`) that pip on the runner reads too;
- a line with a control character, an option that is not kept, a wheel that is not in the repository or not the one
  the line's hash pins: refused (exit 2) naming the line, nothing written;
- the recipe itself, verbatim from the README, against the package registry (marked `registry`; it builds, compiles
  and installs, so it runs only with GROUNDCTL_TEST_REGISTRY=1)."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import venv
from pathlib import Path

import pytest
import yaml

from bootstrap.ci.requirements import parse
from bootstrap.ci.workflows import DEFAULT_REQUIREMENTS, WORKFLOWS
from tests.ci_workflow import WHEEL, WHEEL_SHA256, pin_groundctl
from tests import docs
from tests.conftest import REPO
from tests.test_ci_jobs_run import _init, repo  # noqa: F401 - the fixture
from tests.test_cli_errors import assert_refused


RECORDED = REPO / "tests" / "data" / "ci" / "pip-compile-groundctl-requirements.txt"
RECORDED_WHEEL_SHA256 = "294fe8f2361462076c7733da761264f15c480286bc900299ddd8a0c94735c5c8"  # PROVENANCE.md
RECORDED_URL = "file:///tmp/adopt/infra/vendor/groundctl-0.1.0-py3-none-any.whl"


def _install_steps(repo: Path) -> set[str]:
    return {s["run"] for name in WORKFLOWS
            for job in yaml.safe_load((repo / ".github" / "workflows" / name).read_text())["jobs"].values()
            for s in job["steps"] if s.get("name") == "Install groundctl"}


def _recorded_with_stand_in(repo: Path) -> str:
    """The recorded file in `repo`, its groundctl line's digest that of the stand-in wheel committed at vendor/
    (the recorded wheel itself is not kept: only its digest is in the file)."""
    text = RECORDED.read_text().replace(RECORDED_WHEEL_SHA256, WHEEL_SHA256)
    pin_groundctl(repo, text)
    return text


# -- what pip-compile writes -------------------------------------------------------------------------------------

def test_the_recorded_pip_compile_output_pins_groundctl_by_its_file_url_and_keeps_its_option_line():
    text = RECORDED.read_text()
    assert RECORDED_URL in text and "\n--find-links /opt/wheels\n" in text  # the fixture is what PROVENANCE says
    parsed = parse(text, DEFAULT_REQUIREMENTS)
    assert parsed.problems == ()
    assert (parsed.pin.kind, parsed.pin.line, parsed.pin.where) == ("file-url", 244, RECORDED_URL)
    assert parsed.pin.hashes == (RECORDED_WHEEL_SHA256,)
    assert parsed.pin.candidates()[-2:] == ("vendor/groundctl-0.1.0-py3-none-any.whl",
                                            "groundctl-0.1.0-py3-none-any.whl")
    assert [n.split(":")[0] for n in parsed.notes] == [f"{DEFAULT_REQUIREMENTS} line 7"]
    assert "--find-links /opt/wheels is kept" in parsed.notes[0]


def test_ci_init_accepts_it_in_another_clone_and_the_install_step_finds_the_committed_wheel(
        monkeypatch, capsys, repo, tmp_path_factory):
    text = _recorded_with_stand_in(repo)
    code, out, err = _init(monkeypatch, capsys, repo)
    assert code == 0, err
    assert "line 7: --find-links /opt/wheels is kept" in " ".join(err.split())
    steps = _install_steps(repo)
    assert len(steps) == 1
    step, = steps
    # Run the step as the runner does, in the repository, with a `python` that records what pip was given.
    bin_dir = tmp_path_factory.mktemp("bin")
    (bin_dir / "python").write_text('#!/bin/sh\nprintf "%s\\n" "$@" > "$RECORD"\n')
    (bin_dir / "python").chmod(0o755)
    record = bin_dir / "argv"
    done = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", step], cwd=repo, capture_output=True, text=True,
                          env={"PATH": f"{bin_dir}:/usr/bin:/bin", "GROUNDCTL_INSTALL": DEFAULT_REQUIREMENTS,
                               "RECORD": str(record)}, timeout=60)
    assert done.returncode == 0, done.stderr
    given = record.read_text().split()
    assert given[:4] == ["-m", "pip", "install", "--require-hashes"] and given[4] == "-r"
    installed = (repo / given[5]).read_text().splitlines()
    original = text.splitlines()
    changed = [(i + 1, a, b) for i, (a, b) in enumerate(zip(original, installed)) if a != b]
    assert len(installed) == len(original)
    assert changed == [(244, f"groundctl @ {RECORDED_URL} \\", f"./{WHEEL} \\")]
    assert installed[244] == f"    --hash=sha256:{WHEEL_SHA256}"  # the hash still decides what is installed


def test_the_workflows_read_a_relative_wheel_path_as_it_is(monkeypatch, capsys, repo):
    pin_groundctl(repo)
    assert _init(monkeypatch, capsys, repo)[0] == 0
    assert _install_steps(repo) == {'python -m pip install --require-hashes -r "$GROUNDCTL_INSTALL"'}


def test_a_wheel_rebuilt_after_compiling_is_refused_naming_the_line(monkeypatch, capsys, repo):
    pin_groundctl(repo, RECORDED.read_text())  # the recorded digest; the committed bytes are the stand-in's
    assert_refused(_init(monkeypatch, capsys, repo), 2, "line 244", WHEEL, "not the one the line's --hash pins",
                   "compile the file again")
    assert not (repo / ".github").exists()


def test_a_wheel_that_is_not_in_the_repository_is_refused(monkeypatch, capsys, repo):
    (repo / DEFAULT_REQUIREMENTS).write_text(RECORDED.read_text())
    assert_refused(_init(monkeypatch, capsys, repo), 2, "line 244", RECORDED_URL, "not in the repository",
                   "commit it")
    assert not (repo / ".github").exists()


# -- what is refused ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("char", ["\x1b", "\x00", "\x0b", "\x7f", "\u200b", "\u202e", "\u2028"])
def test_a_requirement_line_with_a_control_character_is_refused_naming_the_line(monkeypatch, capsys, repo, char):
    lines = RECORDED.read_text().replace(RECORDED_WHEEL_SHA256, WHEEL_SHA256).split("\n")
    lines[8] = lines[8].replace("annotated-doc==0.0.7", f"annotated-doc==0.0.7{char}")
    pin_groundctl(repo, "\n".join(lines))
    result = _init(monkeypatch, capsys, repo)
    assert_refused(result, 2, f"{DEFAULT_REQUIREMENTS} line 9", f"U+{ord(char):04X}", "annotated-doc==0.0.7?")
    assert char not in result[2]  # the message shows it inert
    assert not (repo / ".github").exists()


@pytest.mark.parametrize("line,needle", [
    ("-r more-requirements.txt", "-r is not installed by the workflows: it includes another file"),
    ("-e ./groundctl", "-e is not installed by the workflows: an editable install cannot be hash-checked"),
    ("--use-feature fast-deps", "--use-feature is not an option the workflows keep"),
])
def test_an_option_the_workflows_cannot_keep_is_refused_naming_the_line(monkeypatch, capsys, repo, line, needle):
    from tests.ci_workflow import REQUIREMENTS

    pin_groundctl(repo, f"{line}\n{REQUIREMENTS}")
    assert_refused(_init(monkeypatch, capsys, repo), 2, f"{DEFAULT_REQUIREMENTS} line 1: {needle}")


def test_index_options_are_kept_and_a_url_with_credentials_is_never_printed(monkeypatch, capsys, repo):
    from tests.ci_workflow import REQUIREMENTS

    pin_groundctl(repo, "--index-url https://builder:s3cr3t-token@pypi.mirror.example/simple\n"
                        "--extra-index-url=https://pypi.mirror.example/extra\n-f ./wheels\n" + REQUIREMENTS)
    code, out, err = _init(monkeypatch, capsys, repo, "--json")
    assert code == 0, err
    assert "s3cr3t-token" not in out + err and "builder" not in out + err
    notes = __import__("json").loads(out)["install_notes"]
    assert notes[0].startswith(f"{DEFAULT_REQUIREMENTS} line 1: --index-url https://***@pypi.mirror.example/simple "
                               "is kept") and "from a secret instead" in notes[0]
    assert notes[1].startswith(f"{DEFAULT_REQUIREMENTS} line 2: --extra-index-url https://pypi.mirror.example/extra")
    assert notes[2].startswith(f"{DEFAULT_REQUIREMENTS} line 3: --find-links ./wheels is kept")
    assert _install_steps(repo) == {'python -m pip install --require-hashes -r "$GROUNDCTL_INSTALL"'}


@pytest.mark.parametrize("line,ok", [
    (f"groundctl @ https://files.example/groundctl-0.1.0-py3-none-any.whl --hash=sha256:{'3' * 64}", True),
    (f"groundctl==0.1.0 --hash=sha256:{'3' * 64}", True),
    (f"groundctl @ git+https://github.com/example/groundctl@v0.1.0 --hash=sha256:{'3' * 64}", False),
    (f"/home/alice/infra/vendor/groundctl-0.1.0-py3-none-any.whl --hash=sha256:{WHEEL_SHA256}", False),
])
def test_which_groundctl_lines_pin_it(monkeypatch, capsys, repo, line, ok):
    pin_groundctl(repo, f"{line}\nboto3==1.35.0 --hash=sha256:{'2' * 64}\n")
    result = _init(monkeypatch, capsys, repo)
    if ok:
        assert result[0] == 0, result[2]
    else:
        assert_refused(result, 2, f"{DEFAULT_REQUIREMENTS} line 1", "cannot be installed on a runner")


# -- the README's recipe, against the package registry -----------------------------------------------------------

def _readme_recipe() -> str:
    """The README's adoption steps from building groundctl's wheel to `groundctl init`, as one script."""
    blocks = docs.sh_blocks(docs.section("README.md", "Adopting groundctl"))
    first = next(i for i, b in enumerate(blocks) if "python -m build --wheel" in b)
    last = next(i for i, b in enumerate(blocks) if "groundctl init" in b)
    return "".join(blocks[first:last + 1])


def test_the_readme_names_the_recipe_this_file_tests():
    recipe = _readme_recipe()
    for needed in ("python -m build --wheel", "pip-compile --generate-hashes",
                   "python -m pip install --require-hashes -r groundctl-requirements.txt", "groundctl init",
                   "groundctl pins update", "groundctl-pins.json"):
        assert needed in recipe
    # groundctl is installed by the recipe itself before its first groundctl command.
    lines = recipe.splitlines()
    install = next(i for i, line in enumerate(lines) if "pip install --require-hashes" in line)
    assert not any(line.startswith("groundctl ") for line in lines[:install])


@pytest.mark.registry
@pytest.mark.timeout(3600)
@pytest.mark.skipif(os.environ.get("GROUNDCTL_TEST_REGISTRY") != "1",
                    reason="builds, compiles and installs against the package registry: set GROUNDCTL_TEST_REGISTRY=1")
def test_the_readme_recipe_verbatim_from_a_fresh_checkout_to_a_runners_install(tmp_path, release_mirror):
    """The README's block run as written (only its placeholder for groundctl's checkout filled in), in a fresh,
    empty repository, with nothing of groundctl on PATH but what the block installs; then the written workflow's
    install step run as a runner runs it: another path, a fresh virtual environment, none of this machine's
    packages."""
    checkout = tmp_path / "groundctl"
    archive = subprocess.run(["git", "-C", str(REPO), "archive", "--format=tar", "HEAD"], capture_output=True,
                             check=True, timeout=120).stdout
    checkout.mkdir()
    subprocess.run(["tar", "-x", "-C", str(checkout)], input=archive, check=True, timeout=120)
    infra = tmp_path / "infra"
    infra.mkdir()
    subprocess.run(["git", "init", "-q", str(infra)], check=True, timeout=60)
    tools = tmp_path / "tools"
    venv.create(tools, with_pip=True)
    # No groundctl on PATH, nor this checkout on PYTHONPATH: the block installs the one it runs.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "GROUNDCTL_ENDPOINT_URL")}
    # cosign, which the recipe's `pins update` runs on Flux's checksums file, needs Sigstore's servers: a stand-in
    # that accepts (tests/test_pins_update.py holds groundctl to cosign's answers); release files from the mirror.
    (tmp_path / "cosign-bin").mkdir()
    (tmp_path / "cosign-bin" / "cosign").write_text("#!/bin/sh\necho Verified OK >&2\n")
    (tmp_path / "cosign-bin" / "cosign").chmod(0o755)
    env["GROUNDCTL_RELEASE_MIRROR"] = release_mirror.url
    env["PATH"] = f"{tools / 'bin'}:{tmp_path / 'cosign-bin'}:/usr/bin:/bin"
    recipe = _readme_recipe().replace("/path/to/groundctl", str(checkout))
    done = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", recipe], cwd=infra, env=env, capture_output=True,
                          text=True, timeout=3000, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    written = (infra / DEFAULT_REQUIREMENTS).read_text()
    assert f"groundctl @ file://{infra}/vendor/" in written  # pip-compile's absolute URL, as recorded
    assert (tools / "bin" / "groundctl").is_file()  # the block's install put groundctl on this machine
    assert (infra / "environments" / "staging.yaml").is_file()  # `groundctl init`'s first spec

    runner = tmp_path / "runner-workspace"
    shutil.move(str(infra), runner)  # the compiling machine's path is gone, as on a runner
    step, = _install_steps(runner)
    fresh = tmp_path / "runner-python"
    venv.create(fresh, with_pip=True)
    run_env = {**env, "PATH": f"{fresh / 'bin'}:/usr/bin:/bin", "GROUNDCTL_INSTALL": DEFAULT_REQUIREMENTS}
    installed = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", step], cwd=runner, env=run_env,
                               capture_output=True, text=True, timeout=3000)
    assert installed.returncode == 0, installed.stdout[-3000:] + installed.stderr[-3000:]
    wheel = next((runner / "vendor").glob("groundctl-*.whl"))
    assert hashlib.sha256(wheel.read_bytes()).hexdigest() in written
    shown = subprocess.run([str(fresh / "bin" / "groundctl"), "ci", "targets", "--all", "--dir", str(runner),
                            "--json"], env=run_env, capture_output=True, text=True, timeout=300)
    assert shown.returncode == 0, shown.stderr
    origin = subprocess.run([str(fresh / "bin" / "python"), "-c", "import groundctl; print(groundctl.__file__)"],
                            env=run_env, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert origin.stdout.startswith(str(fresh)), origin.stdout  # the runner's own install, not this checkout
