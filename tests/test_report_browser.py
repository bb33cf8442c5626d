"""The HTML report in a real browser: it renders (not blank) and loads nothing from the network.

Headless Chromium opens a report built from hand-written runs (no training, so the test is quick)
as a ``file://`` page. Three things are checked: a screenshot has real content (pixel variance
well above a blank page's), every embedded figure decoded (``naturalWidth > 0``), and Chromium's
own network log lists only ``file:`` and ``data:`` requests. Chromium and chromedriver are
stopped in a ``finally`` block and the test fails if any of their processes is left behind
(PID 1 here does not reap orphans, so a leak would pile up as zombies).
"""

from __future__ import annotations

import io
import json
import os
import re
import tempfile
import time
from pathlib import Path

import pytest
from test_bench_report import write_synthetic_runs

CHROMEDRIVER = Path("/usr/bin/chromedriver")
CHROMIUM = Path("/usr/bin/chromium")

pytestmark = pytest.mark.skipif(
    not CHROMEDRIVER.exists(),
    reason="/usr/bin/chromedriver is missing (apt-get install chromium-driver)",
)


def _descendants(pid: int) -> list[int]:
    import psutil

    try:
        return [p.pid for p in psutil.Process(pid).children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def _alive(pids: list[int]) -> list[int]:
    """PIDs still present in /proc, zombies included (a zombie is a leak too)."""
    return [p for p in pids if Path(f"/proc/{p}").exists()]


def open_report(html: Path, shot: Path) -> dict:
    """Load ``html`` in headless Chromium; screenshot to ``shot``; return what the page did."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    profile = tempfile.mkdtemp(prefix="agentrl-report-chromium-")
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        f"--user-data-dir={profile}",
        "--window-size=1280,1800",
    ):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"performance": "ALL"})
    service = Service(str(CHROMEDRIVER))
    driver = None
    tree: list[int] = []
    try:
        driver = webdriver.Chrome(service=service, options=options)
        driver.set_page_load_timeout(60)
        tree = [service.process.pid, *_descendants(service.process.pid)]
        driver.get("about:blank")
        driver.get_log("performance")  # drop what the browser's own start-up pages requested
        driver.get(html.resolve().as_uri())
        images = driver.execute_script(
            "return Array.from(document.images).map(i => [i.complete, i.naturalWidth]);"
        )
        sections = driver.execute_script(
            "return Array.from(document.querySelectorAll('section')).map(s => s.id);"
        )
        height = driver.execute_script("return document.body.scrollHeight;")
        driver.save_screenshot(str(shot))
        requests = []
        for entry in driver.get_log("performance"):
            message = json.loads(entry["message"])["message"]
            if message.get("method") == "Network.requestWillBeSent":
                requests.append(message["params"]["request"]["url"])
        tree = sorted(set(tree) | set(_descendants(service.process.pid)))
        return {
            "images": images,
            "sections": sections,
            "height": height,
            "requests": requests,
            "tree": tree,
        }
    finally:
        if driver is not None:
            driver.quit()
        else:
            service.stop()
        deadline = time.monotonic() + 15
        while _alive(tree) and time.monotonic() < deadline:
            time.sleep(0.2)
        left = _alive(tree)
        for pid in left:  # only processes this test started
            try:
                os.kill(pid, 9)
            except ProcessLookupError:
                pass
        import shutil

        shutil.rmtree(profile, ignore_errors=True)
        assert not left, f"browser processes left behind: {left}"


def test_report_renders_in_headless_chromium_offline(tmp_path):
    import numpy as np
    from PIL import Image

    from agentrl.reporting.document import SECTION_IDS
    from agentrl.reporting.report import build_report

    runs = write_synthetic_runs(tmp_path / "runs")
    files = build_report([runs], tmp_path / "report")
    html = files.html.read_text()

    # Nothing in the page points outside it: no src/href/url() other than data: or #anchors.
    without_data = re.sub(r"data:image/png;base64,[A-Za-z0-9+/=]+", "data:", html)
    assert not re.findall(r"(?:src|href)\s*=\s*[\"'](?!data:|#)", without_data)
    assert "url(" not in without_data and "@import" not in without_data
    assert not re.findall(r"https?://", without_data)

    shot = tmp_path / "report.png"
    seen = open_report(files.html, shot)

    assert seen["sections"] == list(SECTION_IDS)
    assert len(seen["images"]) == len(files.figures) >= 8
    assert all(complete and width > 0 for complete, width in seen["images"])
    assert seen["height"] > 3000  # the whole report, not an error page
    assert seen["requests"], "the performance log recorded no request at all"
    assert all(url.startswith(("file://", "data:")) for url in seen["requests"]), seen["requests"]
    assert any(url.startswith("file://") for url in seen["requests"])

    pixels = np.asarray(Image.open(io.BytesIO(shot.read_bytes())).convert("L"), dtype=np.float64)
    assert pixels.shape[0] >= 1000 and pixels.shape[1] >= 1000
    assert pixels.std() > 20, f"screenshot looks blank (pixel std {pixels.std():.1f})"
    assert (pixels < 128).mean() > 0.005  # some dark ink: text and plot lines
