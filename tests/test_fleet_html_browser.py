"""The fleet status page in a real browser: headless Chromium (Debian's `chromium` and `chromium-driver`)
driven by Selenium. On the seeded 50-environment fleet (tests/fleetseed.py, read from the emulator), the first
1366×768 viewport shows every critical environment and none of the info-only ones, and for each critical one
its finding and next step whole (inside the viewport, not clipped by its cell); info-level cells are grey and
critical ones red; a row's link opens its collapsed details, whose drill bars are drawn; the page loads nothing
from outside and keeps a hostile record's markup (and key) as text. Skipped, with the reason, where no browser
or driver is installed. The screenshot of the first viewport, taken before it is judged, is kept in the test's
tmp_path (pytest keeps the last three runs' under its base temporary folder) as fleet-status-first-viewport.png,
and copied into $GROUNDCTL_SCREENSHOTS when set."""

from __future__ import annotations

import copy
import os
import shutil
import tempfile
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
SCREENSHOT = "fleet-status-first-viewport.png"
WIDTH, HEIGHT = 1366, 768


@pytest.fixture
def browser():
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    opts = Options()
    opts.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                f"--window-size={WIDTH},{HEIGHT}"):
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    # Chromium's scratch folders (org.chromium.Chromium.*, which it leaves) go to a folder removed after the test;
    # a short one: its singleton socket's path must fit a Unix socket address (108 bytes), which tmp_path may not.
    scratch = tempfile.mkdtemp(prefix="chromium-")
    driver = webdriver.Chrome(service=Service(DRIVER, env={**os.environ, "TMPDIR": scratch}), options=opts)
    # The viewport itself, not the window around it, is 1366×768.
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                           {"width": WIDTH, "height": HEIGHT, "deviceScaleFactor": 1, "mobile": False})
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(scratch, ignore_errors=True)


_VISIBLE = """
const [names, w, h] = arguments;
const out = [];
for (const el of document.querySelectorAll('body *')) {
  if (el.children.length || !el.checkVisibility()) continue;
  const r = el.getBoundingClientRect();
  if (r.width === 0 || r.height === 0 || r.bottom <= 0 || r.top >= h || r.right <= 0 || r.left >= w) continue;
  const text = el.textContent.trim();
  if (names.includes(text)) out.push(text);
}
return [...new Set(out)];
"""


# An element inside the viewport whose content its box does not cut (no ellipsis, no overflow hidden away).
_WHOLE = """
const [el, w, h] = arguments;
const r = el.getBoundingClientRect();
return r.top >= 0 && r.left >= 0 && r.bottom <= h && r.right <= w && r.width > 0
  && el.scrollWidth <= el.clientWidth && el.scrollHeight <= el.clientHeight;
"""


@pytest.fixture(scope="module")
def seeded_page(seeded_fleet, tmp_path_factory):
    report, expected = copy.deepcopy(seeded_fleet)  # the session's seeded fleet (tests/conftest.py)
    path = tmp_path_factory.mktemp("fleet") / "fleet-status.html"
    path.write_text(render(report))
    return path, report, expected


def test_the_first_viewport_shows_every_critical_environment_and_no_info_only_one(seeded_page, browser, tmp_path):
    from selenium.webdriver.common.by import By

    path, report, expected = seeded_page
    browser.get(path.as_uri())
    assert browser.execute_script("return [window.innerWidth, window.innerHeight]") == [WIDTH, HEIGHT]
    # Taken first, so that a failing run leaves what the browser showed.
    shot = tmp_path / SCREENSHOT
    assert browser.save_screenshot(str(shot)) and shot.stat().st_size > 10_000, shot
    keep = os.environ.get("GROUNDCTL_SCREENSHOTS")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, Path(keep) / SCREENSHOT)
    critical = sorted(n for n, lvl in expected.items() if lvl == "critical")
    info_only = sorted(n for n, lvl in expected.items() if lvl == "info")
    assert len(critical) == 9 and len(info_only) == 22
    visible = set(browser.execute_script(_VISIBLE, critical + info_only, WIDTH, HEIGHT))
    assert set(critical) <= visible, set(critical) - visible
    assert not visible & set(info_only), visible & set(info_only)
    # Each critical environment's own row is on the first screen, not just its name in the summary, with its
    # worst finding and next step whole: inside the viewport, and not cut by their cells.
    rows = {r["environment"]: r for r in report["environments"]}
    for name in critical:
        row = browser.find_element(By.CSS_SELECTOR, f'#fleet tr[data-env="{name}"]')
        r = row.rect
        assert row.is_displayed() and 0 <= r["y"] and r["y"] + r["height"] <= HEIGHT, (name, r)
        assert row.get_attribute("data-level") == "critical"
        worst = next(f for f in rows[name]["findings"] if f["level"] == "critical")
        finding, step = (row.find_element(By.CSS_SELECTOR, sel) for sel in ("td.w", "td.x"))
        for cell in (finding, step):
            assert browser.execute_script(_WHOLE, cell, WIDTH, HEIGHT), (name, cell.text)
        assert worst["what"] in finding.text, (name, finding.text)
        assert worst["next"]["command"] in step.text and worst["next"]["runbook"] in step.text, (name, step.text)
    assert browser.execute_script("return document.documentElement.scrollWidth") <= WIDTH  # nothing off to the right
    found = {name: {f["rule"]: f for f in rows[name]["findings"]} for name in critical}
    assert found["prod-identity"]["lock-stale"]["next"]["command"] == "groundctl lock break prod-identity"
    assert found["prod-ledger"]["drift"]["next"]["command"] == "groundctl drift prod-ledger"
    # Since: the first of the three drifted checks in a row, the first of the two failed rebuilds.
    since = browser.find_element(By.CSS_SELECTOR, '#fleet tr[data-env="prod-ledger"] td.w i').text
    assert since == "since 2 h ago", since  # checks hourly up to now: the first drifted one two hours before
    assert "(2 drills in a row)" in found["prod-checkout"]["drill-failed"]["what"]
    # Red means act: a critical cell is red; an info-level one (no replica outside production) is grey.
    color = lambda env, col: browser.execute_script(  # noqa: E731
        "return getComputedStyle(arguments[0]).color",
        browser.find_element(By.CSS_SELECTOR, f'#fleet tr[data-env="{env}"] td:nth-child({col})'))
    assert color("prod-search", 8) == "rgb(198, 40, 40)"       # versioning off in production: critical
    assert color("stage-cache", 8) == "rgb(158, 158, 158)"     # at-risk outside production: info
    assert color("stage-cache", 5) == "rgb(166, 75, 0)"        # its drift: a warning
    strip = browser.find_element(By.ID, "summary").text
    assert "9 critical" in strip and "11 warning" in strip and all(n in strip for n in critical)


def test_a_rows_link_opens_its_details_with_the_drill_bars_drawn(seeded_page, browser):
    from selenium.webdriver.common.by import By

    path, _report, _expected = seeded_page
    browser.get(path.as_uri())
    details = browser.find_element(By.XPATH, '//div[@id="env-stage-api"]/parent::details')
    assert details.get_attribute("open") is None  # collapsed until asked for
    browser.find_element(By.CSS_SELECTOR, '#fleet tr[data-env="stage-api"] a').click()
    assert details.get_attribute("open") is not None
    text = details.text
    assert "rebuild-cluster drill failed" in text and "state-loss: passed" in text
    assert "groundctl drill history stage-api" in text  # each finding with its command
    bars = details.find_elements(By.CSS_SELECTOR, "svg.tl")
    assert len(bars) == 2
    for bar in bars:
        assert bar.rect["width"] > 100 and bar.rect["height"] > 0
        drawn = [p.rect["width"] for p in bar.find_elements(By.CSS_SELECTOR, "path.a")]
        assert drawn and all(w > 0 for w in drawn)
    failed = bars[0].find_elements(By.CSS_SELECTOR, "path.f")
    assert failed and failed[0].rect["width"] > 0  # the failed rebuild's last recovery phase, in red
    # The quiet environments are one click away.
    quiet = browser.find_element(By.ID, "quiet")
    assert quiet.get_attribute("open") is None
    quiet.find_element(By.TAG_NAME, "summary").click()
    assert browser.find_element(By.CSS_SELECTOR, '#quiet tr[data-env="dev-ok-00"]').is_displayed()
    assert browser.execute_script("return performance.getEntriesByType('resource').length") == 0
    assert [e for e in browser.get_log("browser") if e["level"] == "SEVERE"] == []


def test_a_hostile_record_stays_text(tmp_path, browser):
    from selenium.webdriver.common.by import By

    spec = parse_spec(spec_data("gamma", "gamma-state", "http://127.0.0.1:9"), "gamma")
    drills = [drill_report("gamma", "rebuild-cluster", k, rto_minutes=30, recovery=600, fail=k == 3).to_dict()
              for k in range(4)]
    next(p for p in drills[-1]["phases"] if p["status"] == "failed")["message"] = HOSTILE
    raw = {"environment": "gamma", "bucket": "gamma-state",
           "problems": [{"key": f".groundctl/drills/gamma/{HOSTILE}.json", "why": "is not a drill record name"}],
           "protection": {"bucket": "gamma-state", "exists": True, "unreadable": [], "versioning": "Enabled",
                          "noncurrent_days": 30, "replication": "not read"},
           "drift": None, "drill_count": 4, "drills": drills[-1:], "drill_names": [],
           "lock": {"held": True, "stale": False, "holder": {"owner": HOSTILE, "host": "h", "run_id": "r"}},
           "ledger": {}}
    page = tmp_path / "fleet-status.html"
    page.write_text(render(fleet_report([raw], {"gamma": spec}, T0 + 10 * 86400)))
    browser.get(page.as_uri())
    browser.find_element(By.CSS_SELECTOR, '#fleet tr[data-env="gamma"] a').click()
    assert browser.execute_script("return window.__pwned === undefined")
    assert "<script>" in browser.find_element(By.ID, "env-gamma").get_attribute("textContent")
    assert browser.execute_script("return document.querySelectorAll('script, img').length") == 0
