"""A stand-in `gh` (GitHub's CLI, which the runner image provides) for the journey tests: it answers the calls the
generated workflows make from a JSON world (GH_STAND_IN_WORLD), applies `--jq` with the real jq as gh does, and
appends every call, with the body it was given, to GH_STAND_IN_LOG (JSON lines). Any other call fails (exit 9),
so a workflow that starts calling something new fails its journey. Standalone: it runs in a child process."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path


def _option(args: list, name: str, default=None):
    return args[args.index(name) + 1] if name in args else default


def _fields(args: list) -> dict:
    found = {}
    for i, a in enumerate(args):
        if a in ("-F", "-f", "--field", "--raw-field"):
            key, value = args[i + 1].split("=", 1)
            found[key] = Path(value[1:]).read_text() if value.startswith("@") else value
    return found


def _answer(args: list, world: dict, log: dict):
    """The JSON gh would get from GitHub for `args`, or None when the call returns nothing."""
    repo = world["repository"]
    if args[0] == "api":
        method = _option(args, "--method", "GET")
        endpoint = next(a for a in args[1:] if not a.startswith("-") and args[args.index(a) - 1]
                        not in ("--method", "--jq", "-F", "-f"))
        log.update(method=method, endpoint=endpoint, fields=_fields(args))
        routes = [
            (rf"repos/{repo}/commits/(\w+)/pulls", lambda m: world["commit_pulls"].get(m[1], [])),
            (rf"repos/{repo}/pulls/(\d+)", lambda m: world["pulls"][m[1]]),
            (rf"repos/{repo}/actions/runs/(\d+)/jobs", lambda m: {"jobs": world["run_jobs"].get(m[1], [])}),
            (rf"repos/{repo}/issues/(\d+)/comments", lambda m: world["comments"].get(m[1], [])),
            (rf"repos/{repo}/issues/comments/(\d+)", lambda m: _comment(world, int(m[1]))),
        ]
        for pattern, answer in routes:
            m = re.fullmatch(pattern, endpoint)
            if m:
                if method == "POST" and "comments" in endpoint:
                    # Posted with the job's GITHUB_TOKEN: GitHub names its author github-actions[bot].
                    created = {"id": 900 + sum(map(len, world["comments"].values())), "body": log["fields"]["body"],
                               "user": {"login": "github-actions[bot]", "type": "Bot"}}
                    world["comments"].setdefault(m[1], []).append(created)
                    return created
                if method == "PATCH" and "comments/" in endpoint:
                    _comment(world, int(m[1]))["body"] = log["fields"]["body"]
                    return {}
                return answer(m)
        raise LookupError(f"no answer for gh api {endpoint}")
    if args[:2] == ["run", "list"]:
        log.update(workflow=_option(args, "--workflow"), commit=_option(args, "--commit"))
        return [r for r in world["runs"] if r["workflow"] == log["workflow"] and r["headSha"] == log["commit"]
                and r["event"] == _option(args, "--event", r["event"])]
    if args[:2] == ["label", "create"]:
        return None
    if args[:2] == ["issue", "list"]:
        return [i for i in world["issues"] if i["state"] == _option(args, "--state", "open")]
    if args[:2] in (["issue", "create"], ["issue", "edit"]):
        body_file = _option(args, "--body-file")
        log.update(title=_option(args, "--title"), body=Path(body_file).read_text() if body_file else None)
        if args[1] == "create":
            world["issues"].append({"number": 100 + len(world["issues"]), "title": log["title"], "state": "open"})
        return None
    if args[:2] in (["issue", "comment"], ["issue", "close"]):
        log.update(number=args[2], body=_option(args, "--body") or _option(args, "--comment"))
        if args[1] == "close":
            for issue in world["issues"]:
                if str(issue["number"]) == args[2]:
                    issue["state"] = "closed"
        return None
    raise LookupError(f"no answer for gh {' '.join(args)}")


def _comment(world: dict, number: int) -> dict:
    return next(c for comments in world["comments"].values() for c in comments if c["id"] == number)


def main(args: list) -> int:
    world_file = Path(os.environ["GH_STAND_IN_WORLD"])
    world = json.loads(world_file.read_text())
    log = {"argv": args, "token": bool(os.environ.get("GH_TOKEN"))}
    try:
        answer = _answer(args, world, log)
    except (LookupError, KeyError, StopIteration) as exc:
        print(f"stand-in gh: {exc}", file=sys.stderr)
        return 9
    finally:
        with open(os.environ["GH_STAND_IN_LOG"], "a") as out:
            out.write(json.dumps(log) + "\n")
    world_file.write_text(json.dumps(world))
    if answer is None:
        return 0
    text = json.dumps(answer)
    jq = _option(args, "--jq") or _option(args, "-q")
    if jq:
        done = subprocess.run(["jq", "-r", jq], input=text, capture_output=True, text=True, timeout=60)
        sys.stdout.write(done.stdout)
        sys.stderr.write(done.stderr)
        return done.returncode
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
