"""The timeline SVG: valid XML, one bar per phase, the RTO line, text escaped by the serializer."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from recovery.drills.phases import REBUILD_RECOVERY, PhaseResult
from recovery.drills.timeline_svg import render

NS = {"s": "http://www.w3.org/2000/svg"}
T0 = 1_796_000_000.0


def phase(name, start, secs, status="achieved", message="ok"):
    return PhaseResult(name, status, "Reason", message, status != "not-attempted",
                       started_at=None if start is None else T0 + start,
                       ended_at=None if start is None else T0 + start + secs)


PHASES = (phase("preflight", 0, 5), phase("baseline", 5, 5), phase("destroy-flux", 10, 60),
          phase("destroy-cluster", 70, 600), phase("recreate-cluster", 670, 900),
          phase("recreate-flux", 1570, 120), phase("flux-ready", 1690, 300, "failed", "<script>alert(1)</script> & co"),
          phase("verify-kustomizations", None, 0, "not-attempted"))


def parse(text):
    return ET.fromstring(text)


def test_renders_valid_xml_with_one_bar_per_phase_and_the_rto_line():
    root = parse(render(PHASES, rto_seconds=1800, recovery=REBUILD_RECOVERY, title="rebuild-cluster local"))
    bars = root.findall("s:rect[@class='phase']", NS)
    assert [b.get("data-phase") for b in bars] == [p.name for p in PHASES]
    assert [b.get("data-status") for b in bars][-2:] == ["failed", "not-attempted"]
    assert float(bars[-1].get("width")) == 0.0 and float(bars[4].get("width")) > float(bars[3].get("width"))
    rto = root.find("s:line[@id='rto']", NS)
    assert rto is not None
    # The RTO line sits at the recovery's start (recreate-cluster, 670 s) plus 1800 s.
    x0 = float(bars[0].get("x"))
    per_second = float(bars[3].get("width")) / 600
    assert float(rto.get("x1")) == __import__("pytest").approx(x0 + (670 + 1800) * per_second, abs=0.05)
    label = next(t for t in root.findall("s:text", NS) if t.text == "RTO 30.0 min")
    # It ends at the line, so a line at the chart's right edge does not push it out of the image.
    assert label.get("text-anchor") == "end" and float(label.get("x")) < float(rto.get("x1"))


def test_user_text_is_escaped_not_markup():
    text = render(PHASES, rto_seconds=1800, recovery=REBUILD_RECOVERY, title="a <b> & c")
    assert "<script>" not in text and "&lt;script&gt;" in text
    root = parse(text)
    titles = [t.text for t in root.iter("{http://www.w3.org/2000/svg}title")]
    assert "a <b> & c" in titles and any("<script>alert(1)</script> & co" in (t or "") for t in titles)
    assert root.findall("s:script", NS) == []


def test_a_drill_refused_at_preflight_still_draws_every_phase_and_the_rto_line():
    phases = (phase("preflight", 0, 2, "refused"),) + tuple(phase(n, None, 0, "not-attempted") for n in
                                                           ("baseline", "delete-state", "recover", "verify"))
    root = parse(render(phases, rto_seconds=600, recovery=("recover", "verify"), title="state-loss"))
    assert len(root.findall("s:rect[@class='phase']", NS)) == 5
    assert root.find("s:line[@id='rto']", NS) is not None
