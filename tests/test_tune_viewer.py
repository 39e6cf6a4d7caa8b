"""Hand labels end to end: a recorded run in the trace viewer, scans marked in a real headless browser,
the export read by ``soma tune``, and the adapter it saves picked up by the next run of that monitor."""

import json
import re
import shutil
from pathlib import Path

import pytest

from soma_local.cli.main import main
from soma_local.engine.adapters import attach_adapters
from soma_local.engine.monitors import resolve_monitors
from soma_local.engine.pauses import PauseRule
from soma_local.engine.supervise import RunConfig, supervise
from soma_local.engine.trace import TraceWriter
from soma_local.bench.viewer import write_viewer
from soma_local.s1.adapter import read_adapter_file
from conftest import ScriptedS1
from toy_runtime import ToyS2
from waiting import wait_for

# A scripted S2 (tests/toy_runtime.py): what is under test is the viewer and soma tune, so the run's text
# must not depend on a model's sampling history; the S1 that tune sharpens is the real default one.
PRIMES = (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61, 67, 71)
SCRIPT = [word.encode() for n in PRIMES
          for word in re.findall(r"\S+\s*", f"{n} is prime: no number from 2 to {n - 1} divides it.\n")] * 4


def finished_download(folder: Path, pattern: str, count: int) -> tuple[Path, list[dict]] | None:
    """The downloaded JSONL file and its records once the download is complete, else None.

    Chromium writes a download under a ``.crdownload`` name and renames it when done, and the file can
    still be short (or end mid-line) for a moment after its name appears; under load that moment is
    long. Complete means: no partial file is left and the file parses to the ``count`` records expected.
    """
    if any(folder.glob("*.crdownload")):
        return None
    found = sorted(folder.glob(pattern))
    if not found:
        return None
    try:
        records = [json.loads(line) for line in found[0].read_text().splitlines()]
    except json.JSONDecodeError:  # the last line is still being written
        return None
    return (found[0], records) if len(records) == count else None


@pytest.fixture
def browser():
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver_path = shutil.which("chromedriver")
    webdriver = pytest.importorskip("selenium.webdriver")
    if chromium is None or driver_path is None:
        pytest.skip("no headless browser (apt-get install -y chromium chromium-driver)")
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    yield driver
    driver.quit()


def test_scans_labelled_in_the_viewer_become_an_adapter(browser, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    monitor_file = tmp_path / "looping.toml"
    shutil.copy(resolve_monitors(["looping"])[0].file, monitor_file)
    monitors = resolve_monitors([str(monitor_file), "off_task"])
    trace_path = tmp_path / "run.jsonl"
    with TraceWriter(trace_path) as trace:
        result = supervise("List the first thirty prime numbers, one per line, with a reason for each.", ToyS2(SCRIPT),
                           ScriptedS1([0.3]), monitors,
                           RunConfig.of_mode("scan_only", pause=PauseRule(8, 4), max_tokens=300), trace)
    assert result.end.scans >= 24
    page = write_viewer(trace_path)

    downloads = tmp_path / "downloads"
    downloads.mkdir()
    browser.execute_cdp_cmd("Page.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(downloads)})
    browser.get(page.as_uri())
    Select(browser.find_element(By.ID, "label-monitor")).select_by_value("looping")
    rows = browser.find_elements(By.CSS_SELECTOR, "#labels tbody tr")[:24]
    for i, row in enumerate(rows):  # the later half of the run "holds"
        row.find_elements(By.CSS_SELECTOR, "button.label")[0 if i >= 12 else 1].click()
    assert browser.find_element(By.ID, "label-count").text == "24 scan(s) labelled for looping"
    assert rows[0].get_attribute("class") == "not" and rows[-1].get_attribute("class") == "holds"
    browser.find_element(By.ID, "export-labels").click()
    exported, lines = wait_for(lambda: finished_download(downloads, "*.labels.jsonl", 24),
                               "a complete download of the 24 exported labels")
    assert [x["p"] for x in lines] == [0] * 12 + [1] * 12
    scans = [json.loads(line) for line in trace_path.read_text().splitlines() if '"type": "scan"' in line
             or '"type":"scan"' in line]
    assert lines[5]["reasoning"] == result.thinking[: scans[5]["thinking_chars"]]
    assert {x["statement"] for x in lines} == {monitors[0].statement}

    assert main(["tune", str(monitor_file), "--labels", str(exported)]) == 0
    (adapter,) = read_adapter_file(tmp_path / "looping.adapters.json").adapters
    assert adapter.report.n_fit + adapter.report.n_held == 24
    from soma_local.s1.factory import load_s1

    s1 = load_s1(None)
    adapted, used, refused = attach_adapters(s1, resolve_monitors([str(monitor_file)]))
    assert used == ["looping"] and not refused and adapted.version_for(monitors[0].statement) != s1.version
