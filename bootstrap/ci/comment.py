"""The sticky pull-request comment: one per environment, found again by its first line, and never
longer than GitHub accepts.

GitHub refuses an issue or pull-request comment over 65,536 characters. A plan that would not fit is cut
at a layer boundary: whole layer sections are kept in order while they fit, and the rest is replaced by a
note naming the layers left out and the artifact holding the full plan files. Only when the head (the
verdicts, the failing posture rules, the risky changes) alone is too long is it cut at a line boundary.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional, Sequence

from bootstrap.planning import offline_render

GITHUB_COMMENT_LIMIT = 65_536
CUT_MARK = "✂️"


@dataclass(frozen=True)
class Block:
    """A section that is kept whole or left out whole; `label` names it in the cut note."""
    label: str
    text: str


def marker(kind: str, environment: str) -> str:
    """The first line of a comment or issue groundctl owns, by which the workflow finds it again."""
    return f"<!-- groundctl:{kind}:{environment} -->"


def github_length(text: str) -> int:
    """Length as GitHub's limit counts it, taken cautiously: UTF-16 code units, so a character outside the
    Basic Multilingual Plane (the 🔒 of a protected resource) counts twice, never once too few."""
    return len(text.encode("utf-16-le")) // 2


def fit(head: str, blocks: Sequence[Block], tail: str, cut_note: Callable[[Sequence[Block]], str],
        limit: int = GITHUB_COMMENT_LIMIT) -> str:
    """head + as many whole blocks as fit + (when any were left out) the cut note + tail, within `limit`."""
    ends = [github_length(head) + github_length(tail)]  # ends[k]: the length with the first k blocks
    for b in blocks:
        ends.append(ends[-1] + github_length(b.text))
    if ends[-1] <= limit:
        return head + "".join(b.text for b in blocks) + tail
    for keep in range(len(blocks) - 1, -1, -1):
        note = cut_note(blocks[keep:])
        if ends[keep] + github_length(note) <= limit:
            return head + "".join(b.text for b in blocks[:keep]) + note + tail
    return _cut_head(head, tail, cut_note([Block("the rest of the list above", ""), *blocks]), limit)


def _cut_head(head: str, tail: str, note: str, limit: int) -> str:
    room = limit - github_length(tail) - github_length(note)
    if room <= 0:  # only a limit far below any real one gets here; the text still never exceeds it
        text = note + tail
        while github_length(text) > limit:
            text = text[:-1]
        return text
    out, used = [], 0
    for line in head.splitlines(keepends=True):
        if used + github_length(line) > room:
            break
        out.append(line)
        used += github_length(line)
    return "".join(out) + note + tail


# -- the plan comment -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class PlanInputs:
    """What one environment's plan job produced; any of it may be missing when a step failed."""
    environment: str
    offline_doc: Optional[dict] = None   # plan-<env>.json of `plan --offline`
    offline_md: Optional[str] = None     # plan-<env>.md
    live_doc: Optional[dict] = None      # plan-<env>-live.json of the live `plan`
    live_md: Optional[str] = None        # plan-<env>-live.md
    live_note: str = ""                  # why there is no live plan, when there is none
    artifact_name: str = ""
    artifact_url: str = ""
    commit: str = ""
    # The live plan's digests for review (bootstrap/ci/binding.py): the table, then the line the merge job reads.
    digests: str = ""


def _sections(markdown: str, starts: Callable[[str], bool]) -> tuple[str, list[list[str]]]:
    """Text before the first line `starts` accepts, and the sections that begin at each such line."""
    head: list[str] = []
    sections: list[list[str]] = []
    for line in markdown.splitlines():
        if starts(line):
            sections.append([line])
        elif sections:
            sections[-1].append(line)
        else:
            head.append(line)
    return "\n".join(head).strip(), sections


def _collapsed(summary: str, body: list[str]) -> str:
    return "\n".join(["<details>", f"<summary>{summary}</summary>", "", *body, "", "</details>", "", ""])


def _offline_parts(markdown: str) -> tuple[str, list[Block]]:
    """The failing posture rules (shown first), and each layer and the rules table as a collapsed block."""
    _, sections = _sections(markdown, lambda line: line.startswith("## "))
    failing, blocks = "", []
    for lines in sections:
        title, body = lines[0][3:].strip(), lines[1:]
        while body and not body[0].strip():
            body.pop(0)
        while body and not body[-1].strip():
            body.pop()
        if title == "Failing posture rules":
            failing = "\n".join(["#### ❌ Failing posture rules", "", *body, "", ""])
        elif title == "Posture rules":
            blocks.append(Block("the posture rules table", _collapsed("Posture rules (offline)", body)))
        else:
            layer = title.split(" ", 1)[0]
            blocks.append(Block(f"`{layer}` (offline plan)",
                                _collapsed(f"Offline plan: <code>{layer}</code> {title[len(layer):].strip()}", body)))
    return failing, blocks


def _live_parts(markdown: str) -> tuple[str, list[Block]]:
    """The live plan's totals and risky changes, and each layer's resource list as a block."""
    head, sections = _sections(markdown, lambda line: line.strip() == "<details>")
    blocks = []
    for lines in sections:
        summary = next((ln for ln in lines if ln.startswith("<summary>")), "<summary>a layer</summary>")
        layer = summary.split("<code>", 1)[1].split("</code>", 1)[0] if "<code>" in summary else "a layer"
        blocks.append(Block(f"`{layer}` (live plan)", "\n".join(lines).rstrip() + "\n\n"))
    return (head + "\n\n" if head else ""), blocks


def _verdicts(inputs: PlanInputs) -> str:
    if inputs.offline_doc is not None:
        mark = "✅" if inputs.offline_doc.get("passed") else "❌"
        offline = f"{mark} {offline_render.summary(inputs.offline_doc)}"
    else:
        offline = "⚠️ did not run: the spec check or the offline plan failed; see the job log"
    if inputs.live_doc is not None:
        risky = inputs.live_doc.get("risky_count", 0)
        mark = "ℹ️" if inputs.live_doc.get("not_deployed") is True else "⚠️" if risky else "✅"
        live = f"{mark} {inputs.live_doc.get('summary', '')}"
    else:
        live = f"— not run: {inputs.live_note or 'see the job log'}"
    return "\n".join(["| check | result |", "|---|---|", f"| spec check, offline plan and posture | {_cell(offline)} |",
                      f"| live plan (preview through the engine) | {_cell(live)} |", "", ""])


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _pointer(inputs: PlanInputs) -> str:
    if not inputs.artifact_name:
        return f"[the plan artifact]({inputs.artifact_url})" if inputs.artifact_url else "the plan artifact of this run"
    name = f"`{inputs.artifact_name}`"
    return f"the artifact [{name}]({inputs.artifact_url})" if inputs.artifact_url else f"the artifact {name}"


def plan_comment(inputs: PlanInputs, limit: int = GITHUB_COMMENT_LIMIT) -> str:
    """The whole comment for one environment: verdicts, failing rules and risky changes first, then each
    layer collapsed; cut at a layer boundary, with a pointer to the artifact, when it would be too long."""
    env = inputs.environment
    head = f"{marker('plan', env)}\n## groundctl plan · `{env}`\n\n" + _verdicts(inputs)
    blocks: list[Block] = []
    if inputs.offline_md:
        failing, offline_blocks = _offline_parts(inputs.offline_md)
        head += failing
    else:
        offline_blocks = []
    if inputs.live_md:
        live_head, live_blocks = _live_parts(inputs.live_md)
        head += live_head
        blocks += live_blocks
    blocks += offline_blocks
    commit = f" for `{inputs.commit[:12]}`" if inputs.commit else ""
    tail = f"\n<sub>groundctl plan{commit} · full plan files: {_pointer(inputs)} · this comment is updated in place on every push</sub>\n"
    if inputs.digests:  # never cut: the merge applies only the plan these digests describe
        tail = f"\n#### Digests of the reviewed plan\n\n{inputs.digests.rstrip()}\n" + tail

    def cut_note(left_out: Sequence[Block]) -> str:
        names = ", ".join(b.label for b in left_out) or "the rest of this section"
        return (f"\n> {CUT_MARK} **Cut to fit GitHub's {limit:,}-character comment limit.** Left out: {names}. "
                f"The full plan is in {_pointer(inputs)} (`plan-{env}-live.md`, `plan-{env}-<layer>.md`, `plan-{env}.md`).\n")

    return fit(head, blocks, tail, cut_note, limit)
