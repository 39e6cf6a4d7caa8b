"""Many runs in flight against one vLLM server: the same per-question results as one at a time.

N=1 runs each question alone with a plain S1; N=4 keeps four in flight, their requests batched by the
server and their scans batched through one S1 forward pass. Neither may change any run's result.
"""

from __future__ import annotations

import json

import pytest

from soma_local.bench.results import read_results
from soma_local.bench.runner import HarnessSpec, run_bench
from soma_local.errors import DataError
from waiting import wait_for


def _approx_floats(value):
    """Floats compared to 0.02: a batched S1 pass pads each state to the batch's longest, and under
    bfloat16 the padded shapes round differently (a probability moves in the fourth decimal). Text,
    token counts and every decision stay exact."""
    if isinstance(value, float):
        return pytest.approx(value, abs=0.02)
    if isinstance(value, dict):
        return {k: _approx_floats(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_approx_floats(v) for v in value]
    return value


def _comparable(outcome) -> dict:
    """An outcome without its timings: the text, token counts and every scan's decision."""
    scans = [
        {k: v for k, v in r.items() if k not in ("s1_seconds",)}
        for r in outcome.records
        if r.get("type") in ("scan", "reminder", "branch", "takeover")
    ]
    return {"stop": outcome.stop, "thinking": outcome.thinking, "answer": outcome.answer,
            "tokens": outcome.tokens.model_dump(), "scans": scans}


class RecordingProxy:
    """An HTTP front for the real server that records each completion request's prompt ids: two of
    them in front of one server are two servers as far as the engine can tell, and the records show
    which of them each question's requests went to."""

    def __init__(self, upstream: str) -> None:
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        import httpx

        self.prompts: list[tuple[int, ...]] = []
        self.client = client = httpx.Client(base_url=upstream, timeout=600)
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def _forward(self, method: str) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if method == "POST" and self.path == "/v1/completions":
                    proxy.prompts.append(tuple(json.loads(body)["prompt"]))
                answer = client.request(method, self.path, content=body or None,
                                        headers={"Content-Type": "application/json"})
                self.send_response(answer.status_code)
                self.send_header("Content-Type", answer.headers.get("Content-Type", "application/json"))
                self.send_header("Content-Length", str(len(answer.content)))
                self.end_headers()
                self.wfile.write(answer.content)

            def do_GET(self) -> None:
                self._forward("GET")

            def do_POST(self) -> None:
                self._forward("POST")

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.client.close()


def _run_roots(prompts: list[tuple[int, ...]]) -> list[tuple[int, ...]]:
    """For each request, the first request of its run: the shortest recorded prompt it extends."""
    firsts = sorted(set(prompts), key=len)
    return [next(f for f in firsts if p[: len(f)] == f) for p in prompts]


def test_concurrency_4_gives_the_per_question_results_of_1(vllm_url, data_dir, tmp_path):
    """N=1 on one server, N=4 on one server and N=4 over two servers: the same results. Over two
    servers, each question stays on one (its prefix cache is there), and both take questions."""
    spec = HarnessSpec(s2=f"vllm:{vllm_url}", s2_model="smollm2-135m", temperature=0.8, seed=3,
                      scan_interval=32, line_break_slack=8, max_tokens=100)
    proxies = [RecordingProxy(vllm_url), RecordingProxy(vllm_url)]
    two = spec.model_copy(update={"s2": "vllm:" + ",".join(p.url for p in proxies)})
    results = {}
    try:
        for label, n, run_spec in (("n1", 1, spec), ("n4", 4, spec), ("n4-two-servers", 4, two)):
            out = tmp_path / label
            run_bench(run_spec, ["vanilla", "soma"], ["gsm8k"], out, limit=4, concurrency=n, progress=False,
                      data_root=data_dir)
            results[label] = {
                (line.method, line.id): _comparable(line.outcome)
                for method in ("vanilla", "soma")
                for line in read_results(out / "smollm2-135m" / "gsm8k" / f"{method}.jsonl")
            }
    finally:
        for proxy in proxies:
            proxy.close()
    assert len(results["n1"]) == 8
    assert any(v["scans"] for (m, _), v in results["n1"].items() if m == "soma")
    one_at_a_time = _approx_floats(results["n1"])
    assert results["n4"] == one_at_a_time
    assert results["n4-two-servers"] == one_at_a_time
    every = proxies[0].prompts + proxies[1].prompts
    roots = _run_roots(every)
    served_by = [set(roots[: len(proxies[0].prompts)]), set(roots[len(proxies[0].prompts):])]
    assert served_by[0] and served_by[1], "both servers take runs"
    assert not served_by[0] & served_by[1], "no run's requests go to both servers"
    assert len(set(roots)) == 8  # 4 questions x (vanilla, soma), each its own run


def test_concurrency_needs_an_s2_server(tmp_path, data_dir):
    with pytest.raises(DataError, match="needs an S2 server"):
        run_bench(HarnessSpec(s2_model="smollm2-135m"), ["vanilla"], ["gsm8k"], tmp_path, limit=1, concurrency=2,
                  progress=False, data_root=data_dir)


def test_a_killed_concurrent_run_resumes_with_nothing_lost_or_twice(vllm_url, data_dir, tmp_path):
    """SIGKILL while four runs are in flight: the finished lines stay, the resumed run adds the rest."""
    import os
    import signal
    import subprocess
    import sys
    from pathlib import Path

    from soma_local.bench.datasets import get_benchmark, load_items
    from soma_local.calibration.runs import sample

    root = Path(__file__).resolve().parents[1]
    cmd = [sys.executable, "-m", "soma_local.cli.main", "bench", "run", "--method", "vanilla", "--benchmark", "gsm8k",
           "--limit", "6", "--max-tokens", "60", "--s2", f"vllm:{vllm_url}", "--s2-model", "smollm2-135m",
           "--concurrency", "4", "--out", str(tmp_path)]
    env = dict(os.environ, PYTHONPATH=str(root), SOMA_DATA_DIR=str(data_dir))
    path = tmp_path / "smollm2-135m" / "gsm8k" / "vanilla.jsonl"
    lines = lambda: path.read_bytes().splitlines(keepends=True) if path.exists() else []  # noqa: E731
    proc = subprocess.Popen(cmd, cwd=root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for(lines, "a first result to kill the run after", timeout=600,
             unless=lambda: proc.poll() is not None and "the run ended before it could be killed")
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
