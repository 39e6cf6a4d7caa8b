"""`soma run` as a user calls it: clear one-line errors, exit code 2, nothing half-written."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def soma(*args, cwd=ROOT, stdin=None):
    return subprocess.run(
        [sys.executable, "-m", "soma_local.cli", *args],
        cwd=cwd, capture_output=True, text=True, input=stdin, timeout=600,
    )


def test_broken_monitor_file_is_named(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "x"\nstatement = ""\nreminder = "r"\n[takeover]\nmax_tokens = 5\n')
    r = soma("run", "q", "--monitor", str(bad), "--s1", "none")
    assert r.returncode == 2
    assert str(bad) in r.stderr and "'statement'" in r.stderr and "Traceback" not in r.stderr


def test_missing_model_and_bad_threshold(tmp_path):
    r = soma("run", "q", "--s2-model", str(tmp_path / "nope.gguf"))
    assert r.returncode == 2 and "no such GGUF file" in r.stderr
    r = soma("run", "q", "--threshold", "overthinking")
    assert r.returncode == 2 and "NAME=H" in r.stderr


def test_empty_stdin_question():
    r = soma("run", "-", stdin="")
    assert r.returncode == 2 and "no question" in r.stderr


def test_supervised_run_streams_scans_and_writes_trace(tmp_path):
    trace = tmp_path / "t.jsonl"
    r = soma(
        "run", "List the first twenty prime numbers and explain each.", "--max-tokens", "160",
        "--scan-interval", "48", "--line-break-slack", "16", "--threads", "2", "--seed", "3",
        "--trace", str(trace),
    )
    assert r.returncode == 0, r.stderr
    assert "[scan 1 @" in r.stdout and "stop=" in r.stdout and "\033[" not in r.stdout  # no colour off a TTY
    lines = trace.read_text().splitlines()
    assert '"run_start"' in lines[0] and '"run_end"' in lines[-1] and any('"scan"' in x for x in lines)
