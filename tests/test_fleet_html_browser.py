"""The fleet status page in a real browser: headless Chromium (Debian's `chromium` and `chromium-driver`)
driven by Selenium. The page must show one row per environment, draw every drill timeline with visible
bars and the RTO line, load nothing from outside, and keep a hostile record's markup as text.
Skipped, with the reason, where no browser or driver is installed. A screenshot is kept under the test's
temporary folder (and in $GROUNDCTL_SCREENSHOTS when set) for a person to look at."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from bootstrap.spec import parse_spec
from recovery.fleet.html import render
from recovery.fleet.status import fleet_report
from tests.fleetseed import T0, drill_report, spec_data

CHROMIUM = next((p for p in (shutil.which("chromium"), shutil.which("chromium-browser"), shutil.which("google-chrome"))
                 if p), None)
DRIVER = shutil.which("chromedriver")
webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (it is in the test extras)")
pytestmark = pytest.mark.skipif(CHROMIUM is None or DRIVER is None,
                                reason="no headless Chromium here: install Debian's chromium and chromium-driver "
                                       "(.ci/run does)")

HOSTILE = '<img src=x onerror="window.__pwned=1"><script>window.__pwned=1</script>'


def _raw(name: str, *, drifted: bool, drills: list, lock: bool = False, versioning: str = "Enabled") -> dict:
    return {"environment": name, "bucket": f"{name}-state", "problems": [],
            "protection": {"bucket": f"{name}-state", "exists": True, "unreadable": [], "versioning": versioning,
                           "mfa_delete": False, "noncurrent_days": 30,
                           "replication": {"enabled_rules": 1, "destinations": ["arn:aws:s3:::r"], "time_control": True}},
            "drift": {"check_id": "c1", "environment": name, "at": "2025-11-25T10:00:00.000Z", "drift": drifted,
                      "drifted_layers": ["network"] if drifted else [], "layers": []},
            "drill_count": len(drills), "drills": drills,
            "lock": {"held": lock, "stale": False, "holder": {"owner": "ci", "host": "runner", "run_id": "r1"} if lock else None,
                     "reason": "", "pulumi_locks": []},
            "ledger": {"network": {"serial": 12, "at": "2025-11-24T09:00:00Z"}}}


@pytest.fixture
def page(tmp_path) -> Path:
    specs, raws = {}, []
    for i, name in enumerate(("alpha", "beta", "gamma")):
        specs[name] = parse_spec(spec_data(name, f"{name}-state", "http://127.0.0.1:9"), name)
        drills = [drill_report(name, "rebuild-cluster", k, rto_minutes=30, recovery=600 + 120 * k * i).to_dict()
                  for k in range(3)]
        drills += [drill_report(name, "state-loss", 3, rto_minutes=30, recovery=300, fail=name == "beta").to_dict()]
        if name == "gamma":  # a record written by someone hostile: its message must stay text
            drills[-1]["phases"][0]["message"] = HOSTILE
            drills[-1]["phases"][0]["name"] = HOSTILE
        raws.append(_raw(name, drifted=name == "beta", drills=drills, lock=name == "gamma",
                         versioning="Suspended" if name == "gamma" else "Enabled"))
    report = fleet_report(raws, specs, now=T0 + 10 * 86400)
    path = tmp_path / "fleet-status.html"
    path.write_text(render(report))
    return path


@pytest.fixture
def browser():
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    opts = Options()
    opts.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1400,1800"):
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(DRIVER), options=opts)
    try:
        yield driver
    finally:
        driver.quit()


def test_the_page_renders_every_environment_and_timeline(page, browser, tmp_path):
    from selenium.webdriver.common.by import By

    browser.get(page.as_uri())
    assert browser.title == "groundctl fleet status"
    rows = browser.find_elements(By.CSS_SELECTOR, "#fleet tbody tr")
    assert [r.get_attribute("data-env") for r in rows] == ["alpha", "beta", "gamma"]
    beta = rows[1].text
    assert "drift" in beta and "in network" in beta and "failed" in beta  # drifted, last drill failed
    assert "attention" in (rows[1].get_attribute("class") or "")
    assert "fails" in rows[2].text and "versioning is Suspended" in rows[2].text
    assert "held" in rows[2].text and "ci@runner" in rows[2].text

    timelines = browser.find_elements(By.CSS_SELECTOR, "details.timeline")
    assert len(timelines) == 6  # the latest rebuild-cluster and state-loss drill of each environment
    for t in timelines:
        bars = t.find_elements(By.CSS_SELECTOR, "rect.phase")
        assert bars, t.text
        widths = [b.rect["width"] for b in bars if b.get_attribute("data-status") == "achieved"]
        assert widths and all(w > 0 for w in widths)  # drawn, not just present in the markup
        rto = t.find_element(By.CSS_SELECTOR, "line.rto")
        assert rto.rect["height"] > 0 and rto.value_of_css_property("display") != "none"

    # Markup from a record stays text: nothing ran, and it is shown as written.
    assert browser.execute_script("return window.__pwned === undefined")
    assert "<script>" in browser.find_element(By.ID, "env-gamma").get_attribute("textContent")
    # One static file: no request left the page.
    assert browser.execute_script("return performance.getEntriesByType('resource').length") == 0
    errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert errors == []

    shot = tmp_path / "fleet-status.png"
    assert browser.save_screenshot(str(shot)) and shot.stat().st_size > 10_000
    keep = os.environ.get("GROUNDCTL_SCREENSHOTS")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, Path(keep) / shot.name)
