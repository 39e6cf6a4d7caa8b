"""Kill a real ``soma bench run`` with SIGKILL mid-run, resume it: nothing lost, nothing twice."""

import os
import signal
import subprocess
import sys
from pathlib import Path

from soma_local.bench.datasets import get_benchmark, load_items
from soma_local.calibration.runs import sample
from soma_local.bench.results import read_results
from waiting import wait_for

ROOT = Path(__file__).resolve().parents[1]


def _bench(out: Path, data_dir: Path, *extra: str, stdout=subprocess.PIPE) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "soma_local.cli.main", "bench", "run", "--method", "vanilla", "--method", "dynasor",
           "--benchmark", "gsm8k", "--limit", "3", "--max-tokens", "40", "--dynasor-interval", "16",
           "--threads", "1", "--n-ctx", "1024", "--out", str(out), *extra]
    env = dict(os.environ, PYTHONPATH=str(ROOT), SOMA_DATA_DIR=str(data_dir))
    return subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=stdout, stderr=subprocess.STDOUT)


def _lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True) if path.exists() else []


def test_sigkill_then_resume_loses_and_duplicates_nothing(tmp_path, data_dir):
    vanilla = tmp_path / "smollm2-135m" / "gsm8k" / "vanilla.jsonl"
    dynasor = vanilla.with_name("dynasor.jsonl")
    log = tmp_path / "killed_run.log"
    with log.open("wb") as out:  # a file, not a pipe nobody reads until the kill: a full pipe stalls the run
        proc = _bench(tmp_path, data_dir, stdout=out)
    wait_for(lambda: len(_lines(vanilla)) >= 2, "two vanilla results to kill the run after", timeout=600,
             unless=lambda: proc.poll() is not None and "the run ended before it could be killed:\n"
             + log.read_text(errors="replace")[-2000:])
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    before = _lines(vanilla) + _lines(dynasor)
    assert 2 <= len(before) < 6  # killed part-way

    resumed = _bench(tmp_path, data_dir, "--workers", "2")  # the parallel path: the parent alone writes
    out, _ = resumed.communicate(timeout=600)
    assert resumed.returncode == 0, out.decode()[-2000:]
    expected = {i.id for i in sample(load_items(get_benchmark("gsm8k"), data_dir), 3, 0)}
    for path in (vanilla, dynasor):
        ids = [r.id for r in read_results(path)]
        assert sorted(ids) == sorted(expected)  # every question once
    after = _lines(vanilla) + _lines(dynasor)
    assert all(line in after for line in before if line.endswith(b"\n"))  # finished lines untouched
