"""No build-machine paths in anything shared: the committed files, and what the generators write."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from soma_local.bench.runner import HarnessSpec
from soma_local.data_dir import shareable_path

REPO = Path(__file__).resolve().parents[1]
# An absolute path into a home, the build machine's work tree or a temp folder. The look-behind keeps
# relative paths (``results/work/x``) and URLs (``github.com/home/``) out; ``file:///work/`` is caught.
ABSOLUTE = re.compile(rb"(?<![\w.~$-])/(?:work|root|home|tmp|Users)/[\w.$-]+")


def committed_files() -> list[Path]:
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("not a git checkout")
    out = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout
    return [REPO / name for name in out.decode().split("\0") if name]


def test_no_committed_file_holds_an_absolute_path_of_the_build_machine():
    files = committed_files()
    assert len(files) > 50  # the scan really ran over the checkout
    hits = []
    for path in files:
        if not path.is_file() or path == Path(__file__).resolve():  # deleted; or this file's own examples
            continue
        for match in ABSOLUTE.finditer(path.read_bytes()):
            hits.append(f"{path.relative_to(REPO)}: {match.group().decode(errors='replace')}")
    assert not hits, "absolute paths in committed files:\n" + "\n".join(hits[:20])


def test_the_scan_pattern_catches_what_it_must_and_nothing_else():
    caught = [b'"/work/shared/datasets/traces"', b"file:///home/ann/x.html", b"--out /tmp/r.gguf", b"(/root/.cache)"]
    missed = [b"benchmarks/work/x", b"https://github.com/home/x", b"$SOMA_DATA_DIR/traces", b"~/tmp/x", b"a/tmp/b"]
    assert all(ABSOLUTE.search(s) for s in caught)
    assert not any(ABSOLUTE.search(s) for s in missed)


def test_shareable_path_names_data_files_by_the_data_variable(tmp_path, monkeypatch):
    data = tmp_path / "datasets"
    (data / "traces").mkdir(parents=True)
    monkeypatch.setenv("SOMA_DATA_DIR", str(data))
    monkeypatch.chdir(tmp_path)
    assert shareable_path(data / "traces" / "a.jsonl") == "$SOMA_DATA_DIR/traces/a.jsonl"
    assert shareable_path(data) == "$SOMA_DATA_DIR"
    assert shareable_path("datasets/traces") == "$SOMA_DATA_DIR/traces"  # relative spellings too


def test_shareable_path_keeps_working_directory_paths_relative_and_others_as_names(tmp_path, monkeypatch):
    monkeypatch.setenv("SOMA_DATA_DIR", str(tmp_path / "data"))
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path / "work")
    assert shareable_path(tmp_path / "work" / "runs" / "q.jsonl") == "runs/q.jsonl"
    assert shareable_path(tmp_path / "elsewhere" / "q.jsonl") == "q.jsonl"


def test_bench_results_record_an_s1_path_by_its_shareable_form(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    spec = lambda s1: HarnessSpec(s2_model="/models/s2.gguf", s1=s1).identity()
    assert spec("readout:/models/readout.gguf")["s1"] == "readout:readout.gguf"
    assert spec(f"classifier:{tmp_path}/s1/mine")["s1"] == "classifier:s1/mine"
    assert spec("classifier")["s1"] == "classifier" and spec("jev:http://127.0.0.1:8000")["s1"] == "jev:http://127.0.0.1:8000"
    assert "s2_model" not in spec("classifier")
