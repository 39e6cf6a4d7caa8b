from __future__ import annotations

from pathlib import Path
from typing import Sequence

import pytest

from soma_local.data_dir import data_dir as soma_data_dir
from soma_local.s1.base import S1


class WordTokenizer:
    """Whitespace tokens: enough to test state truncation without a model."""

    def encode(self, text: str) -> list[int]:
        return [hash(w) for w in text.split()] if text else []

    def decode(self, ids):  # pragma: no cover - not used by the word-level tests
        raise NotImplementedError


class CharTokenizer:
    """Characters as tokens: an S1 tokenizer that can cut a task or a state anywhere, exactly."""

    def encode(self, text: str) -> list[int]:
        return [ord(c) for c in text]

    def decode(self, ids) -> str:
        return "".join(map(chr, ids))


class ScriptedS1(S1):
    """An S1 test double with a fixed probability sequence, recording every state it is shown.

    The loop's behaviour (where reminders go, what S1 sees) is what these tests check; the S1's own
    quality is tested with real models elsewhere.
    """

    name = "scripted"

    def __init__(self, probs: Sequence[float | None], input_limit: int = 100_000):
        self.probs = list(probs)
        self.input_limit = input_limit
        self.seen: list[list[tuple[str, str]]] = []
        self._tok = _RealTokenizerless()

    @property
    def tokenizer(self):
        return self._tok

    def score_states(self, pairs):
        self.seen.append(list(pairs))
        i = min(len(self.seen) - 1, len(self.probs) - 1)
        p = self.probs[i]
        if isinstance(p, Exception):
            raise p
        return [p for _ in pairs]


class _RealTokenizerless:
    def encode(self, text: str) -> list[int]:
        return list(range(len(text) // 4))

    def decode(self, ids):
        raise NotImplementedError


@pytest.fixture(scope="session")
def smollm_path() -> Path:
    from soma_local.s2.model_files import resolve_gguf

    return resolve_gguf(None)


@pytest.fixture(scope="session")
def s2(smollm_path):
    from soma_local.s2.base import SamplingParams
    from soma_local.s2.llama_cpp import LlamaCppS2

    backend = LlamaCppS2(smollm_path, n_ctx=4096, sampling=SamplingParams(seed=7))  # default threads
    yield backend
    backend.close()


@pytest.fixture(scope="session")
def data_dir() -> Path:
    path = soma_data_dir()
    if not path.is_dir():
        pytest.skip(f"no data directory at {path} (set SOMA_DATA_DIR)")
    return path


def _vllm_missing() -> str | None:
    from soma_local.errors import SomaError
    from soma_local.s2.model_files import hf_folder
    from soma_local.s2.vllm_server import vllm_python

    if not vllm_python().is_file():
        return f"no vLLM environment at {vllm_python()} (run: bash scripts/setup_vllm.sh)"
    try:
        hf_folder("smollm2-135m")
    except SomaError as exc:
        return str(exc)
    return None


@pytest.fixture(scope="session")
def vllm_folder():
    """The embedded model as the Hugging Face folder vLLM serves. Skipped only off CI when it is
    missing (``bash scripts/setup_vllm.sh`` makes it); CI must run the tests that need it."""
    import os

    from soma_local.s2.model_files import hf_folder

    missing = _vllm_missing()
    if missing:
        if os.environ.get("CI"):
            pytest.fail(f"CI must run the vLLM tests: {missing}")
        pytest.skip(missing)
    return hf_folder("smollm2-135m")


@pytest.fixture(scope="session")
def vllm_url(tmp_path_factory, vllm_folder):
    """A real vLLM server (from .venv-vllm) serving the embedded SmolLM2, for the whole session.

    float32, not the bf16 of serving: the tests compare token ids across requests that split the
    same text differently (pauses, branches, a prefix-cache hit, other runs in the batch), and in bf16
    a 135M model's near-ties flip under those numeric differences."""
    import os

    from soma_local.s2.vllm_server import local_vllm

    if os.environ.get("SOMA_TEST_VLLM_URL"):  # a float32 server already running (while developing)
        yield os.environ["SOMA_TEST_VLLM_URL"]
        return
    log = tmp_path_factory.mktemp("vllm") / "server.log"
    with local_vllm(vllm_folder, "smollm2-135m", log=log, dtype="float32") as url:
        import httpx

        # Warm-up: the first requests compile kernels and fill caches; no test should time that.
        httpx.post(f"{url}/v1/completions", json={"model": "smollm2-135m", "prompt": [1, 2, 3], "max_tokens": 4},
                   timeout=600).raise_for_status()
        yield url
