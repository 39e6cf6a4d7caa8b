from pathlib import Path

import pytest

from soma_local.errors import MonitorFileError
from soma_local.engine.monitors import MONITORS_DIR, load_monitor, resolve_monitors

GOOD = """
name = "m"
statement = "S holds"
reminder = "R"
[takeover]
conclusion = "C"
prefill = "P"
max_tokens = 8
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "m.toml"
    path.write_text(text)
    return path


def test_shipped_monitors_load():
    ms = resolve_monitors(["overthinking", "unanswerable"])
    assert [m.name for m in ms] == ["overthinking", "unanswerable"]
    assert ms[0].takeover.max_tokens == 64 and ms[0].takeover.prefill == "**Final Answer**"
    assert ms[1].takeover.max_tokens == 512
    assert ms[1].takeover.conclusion.startswith("The problem is missing necessary information")
    assert ms[1].takeover.prefill == "\\boxed{I don't know.}"


def test_every_shipped_monitor_is_whole():
    """Each file in monitors/ loads and carries what the engine and calibration read from it, so a new
    monitor is one file."""
    names = sorted(p.stem for p in MONITORS_DIR.glob("*.toml"))
    assert {"overthinking", "unanswerable", "looping"} <= set(names) and len(names) >= 5
    for m in resolve_monitors(names):
        assert m.statement and m.reminder and m.takeover.prefill and m.takeover.max_tokens > 0
        assert m.objective and m.calibration_data


@pytest.mark.parametrize(
    "text, field",
    [
        (GOOD.replace('reminder = "R"\n', ""), "reminder"),
        ('colour = "red"\n' + GOOD, "colour"),
        (GOOD.replace('statement = "S holds"', 'statement = "   "'), "statement"),
        (GOOD.replace("max_tokens = 8", "max_tokens = 0"), "takeover.max_tokens"),
        (GOOD.replace('prefill = "P"', 'prefill = "P"\nbudget = 3'), "takeover.budget"),
    ],
)
def test_broken_file_names_file_and_field(tmp_path, text, field):
    path = write(tmp_path, text)
    with pytest.raises(MonitorFileError) as err:
        load_monitor(path)
    assert str(path) in str(err.value) and f"'{field}'" in str(err.value)


def test_invalid_toml_and_missing_file(tmp_path):
    with pytest.raises(MonitorFileError, match="not valid TOML"):
        load_monitor(write(tmp_path, "name = "))
    with pytest.raises(MonitorFileError, match="not found"):
        load_monitor(tmp_path / "nope.toml")
    with pytest.raises(MonitorFileError, match="unknown monitor 'nope'"):
        resolve_monitors(["nope"])


def test_user_file_by_path(tmp_path):
    (m,) = resolve_monitors([str(write(tmp_path, GOOD))])
    assert m.name == "m" and m.statement == "S holds"
