"""The drill's timeline as an SVG image: one bar per phase against the RTO line.

Built with xml.etree, so every phase name and message is escaped by the serializer (a phase message
holding `<script>` stays text). Bars sit on a time axis from the drill's start; the RTO line is
drawn at the start of the recovery plus the RTO, which is where the last recovery bar must end.
A phase that never ran still gets its row (a zero-width bar), so the chart always shows every phase.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from recovery.drills.phases import PhaseResult

SVG_NS = "http://www.w3.org/2000/svg"
COLORS = {"achieved": "#2e7d32", "failed": "#c62828", "refused": "#ef6c00", "skipped": "#9e9e9e",
          "not-attempted": "#e0e0e0", "running": "#1565c0"}
ROW, LABEL_W, CHART_W, TOP = 28, 190, 560, 40


def _fmt(seconds: float) -> str:
    if seconds >= 120:
        return f"{seconds / 60:.1f} min"
    return f"{seconds:.1f} s"


def render(phases: tuple[PhaseResult, ...], *, rto_seconds: float, recovery: tuple[str, ...],
           title: str) -> str:
    """The SVG document as text."""
    timed = [p for p in phases if p.started_at is not None]
    origin = min((p.started_at for p in timed), default=0.0)
    ends = [p.ended_at for p in timed if p.ended_at is not None]
    rec_starts = [p.started_at for p in timed if p.name in recovery and p.attempted]
    # Before any recovery phase ran (a refused drill), the line is drawn from the drill's start.
    rto_at = (min(rec_starts) if rec_starts else origin) - origin + rto_seconds
    span = max([(max(ends) - origin) if ends else 0.0, rto_at or 0.0, 1.0])
    scale = CHART_W / span
    height = TOP + ROW * len(phases) + 40
    width = LABEL_W + CHART_W + 40

    ET.register_namespace("", SVG_NS)
    svg = ET.Element(f"{{{SVG_NS}}}svg", {"width": str(width), "height": str(height),
                                          "viewBox": f"0 0 {width} {height}", "role": "img"})
    ET.SubElement(svg, f"{{{SVG_NS}}}title").text = title
    ET.SubElement(svg, f"{{{SVG_NS}}}text", {"x": "8", "y": "20", "font-family": "sans-serif",
                                             "font-size": "14", "font-weight": "bold"}).text = title
    for i, p in enumerate(phases):
        y = TOP + i * ROW
        ET.SubElement(svg, f"{{{SVG_NS}}}text", {"x": "8", "y": str(y + 17), "font-family": "sans-serif",
                                                 "font-size": "12"}).text = p.name
        start = (p.started_at - origin) if p.started_at is not None else 0.0
        secs = p.seconds or 0.0
        bar = ET.SubElement(svg, f"{{{SVG_NS}}}rect", {
            "class": "phase", "data-phase": p.name, "data-status": p.status,
            "x": f"{LABEL_W + start * scale:.2f}", "y": str(y + 4), "height": str(ROW - 8),
            "width": f"{max(secs * scale, 0.0):.2f}", "fill": COLORS.get(p.status, "#607d8b")})
        ET.SubElement(bar, f"{{{SVG_NS}}}title").text = f"{p.name}: {p.status} ({p.reason}) {p.message}"
        label = _fmt(secs) if p.seconds is not None and p.attempted else p.status
        ET.SubElement(svg, f"{{{SVG_NS}}}text", {"x": f"{LABEL_W + start * scale + secs * scale + 4:.2f}",
                                                 "y": str(y + 17), "font-family": "sans-serif",
                                                 "font-size": "11", "fill": "#424242"}).text = label
    axis_y = TOP + ROW * len(phases) + 6
    ET.SubElement(svg, f"{{{SVG_NS}}}line", {"class": "axis", "x1": str(LABEL_W), "x2": str(LABEL_W + CHART_W),
                                             "y1": str(axis_y), "y2": str(axis_y), "stroke": "#616161"})
    ET.SubElement(svg, f"{{{SVG_NS}}}text", {"x": str(LABEL_W + CHART_W - 60), "y": str(axis_y + 16),
                                             "font-family": "sans-serif", "font-size": "11"}).text = _fmt(span)
    x = f"{LABEL_W + rto_at * scale:.2f}"
    ET.SubElement(svg, f"{{{SVG_NS}}}line", {"id": "rto", "class": "rto", "x1": x, "x2": x, "y1": str(TOP - 6),
                                             "y2": str(axis_y), "stroke": "#d32f2f", "stroke-width": "2",
                                             "stroke-dasharray": "6 4"})
    # Anchored at its end, left of the line: the line is often the chart's right edge, where a label
    # starting at it would be cut off.
    ET.SubElement(svg, f"{{{SVG_NS}}}text", {"x": f"{LABEL_W + rto_at * scale - 4:.2f}", "y": str(TOP - 10),
                                             "text-anchor": "end", "font-family": "sans-serif", "font-size": "11",
                                             "fill": "#d32f2f"}).text = f"RTO {_fmt(rto_seconds)}"
    return ET.tostring(svg, encoding="unicode", xml_declaration=False) + "\n"
