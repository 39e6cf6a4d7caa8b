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
    from soma_local.models import resolve_gguf

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
