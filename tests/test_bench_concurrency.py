"""Many runs in flight against one vLLM server: the same per-question results as one at a time.

N=1 runs each question alone with a plain S1; N=4 keeps four in flight, their requests batched by the
server and their scans batched through one S1 forward pass. Neither may change any run's result.
"""

from __future__ import annotations

import pytest

from soma_local.bench.results import read_results
from soma_local.bench.runner import EngineSpec, run_bench
from soma_local.errors import DataError


def _comparable(outcome) -> dict:
    """An outcome without its timings: the text, token counts and every scan's decision."""
    scans = [
        {k: v for k, v in r.items() if k not in ("s1_seconds",)}
        for r in outcome.records
        if r.get("type") in ("scan", "reminder", "branch", "takeover")
    ]
    return {"stop": outcome.stop, "thinking": outcome.thinking, "answer": outcome.answer,
            "tokens": outcome.tokens.model_dump(), "scans": scans}


def test_concurrency_4_gives_the_per_question_results_of_1(vllm_url, data_dir, tmp_path):
    spec = EngineSpec(s2=f"vllm:{vllm_url}", s2_model="smollm2-135m", temperature=0.8, seed=3,
                      scan_interval=32, line_break_slack=8, max_tokens=100)
    results = {}
    for n in (1, 4):
        out = tmp_path / f"n{n}"
        run_bench(spec, ["vanilla", "soma"], ["gsm8k"], out, limit=4, concurrency=n, progress=False,
                  data_root=data_dir)
        results[n] = {
            (line.method, line.id): _comparable(line.outcome)
            for method in ("vanilla", "soma")
            for line in read_results(out / "smollm2-135m" / "gsm8k" / f"{method}.jsonl")
        }
    assert len(results[1]) == 8
    assert any(v["scans"] for (m, _), v in results[1].items() if m == "soma")
    assert results[4] == results[1]


def test_concurrency_needs_an_s2_server(tmp_path, data_dir):
    with pytest.raises(DataError, match="needs an S2 server"):
        run_bench(EngineSpec(s2_model="smollm2-135m"), ["vanilla"], ["gsm8k"], tmp_path, limit=1, concurrency=2,
                  progress=False, data_root=data_dir)


def test_a_killed_concurrent_run_resumes_with_nothing_lost_or_twice(vllm_url, data_dir, tmp_path):
    """SIGKILL while four runs are in flight: the finished lines stay, the resumed run adds the rest."""
    import os
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    from soma_local.bench.datasets import get_benchmark, load_items, sample

    root = Path(__file__).resolve().parents[1]
    cmd = [sys.executable, "-m", "soma_local.cli", "bench", "run", "--method", "vanilla", "--benchmark", "gsm8k",
           "--limit", "6", "--max-tokens", "60", "--s2", f"vllm:{vllm_url}", "--s2-model", "smollm2-135m",
           "--concurrency", "4", "--out", str(tmp_path)]
    env = dict(os.environ, PYTHONPATH=str(root), SOMA_DATA_DIR=str(data_dir))
    path = tmp_path / "smollm2-135m" / "gsm8k" / "vanilla.jsonl"
    lines = lambda: path.read_bytes().splitlines(keepends=True) if path.exists() else []  # noqa: E731
    proc = subprocess.Popen(cmd, cwd=root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 400
    while not lines() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    assert proc.poll() is None, "the run ended before it could be killed"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    before = lines()
    assert 1 <= len(before) < 6
    resumed = subprocess.run(cmd, cwd=root, env=env, capture_output=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr.decode()[-2000:]
    expected = {i.id for i in sample(load_items(get_benchmark("gsm8k"), data_dir), 6, 0)}
    assert sorted(r.id for r in read_results(path)) == sorted(expected)
    after = lines()
    assert all(line in after for line in before if line.endswith(b"\n"))
