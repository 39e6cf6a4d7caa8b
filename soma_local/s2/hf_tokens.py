"""A Hugging Face model folder's tokenizer, in the byte-exact terms the S2 interface needs.

An HTTP S2 sends and receives token ids; what it needs locally is the tokenizer that made them:
ids for prompts and insertions, the exact bytes of each id (a stop text or a line break can fall
inside a token, a character can span two), the chat template and the special tokens. Read from
``tokenizer.json`` with the ``tokenizers`` library (no model weights, nothing from a network).
"""

from __future__ import annotations

import json
import threading
from functools import lru_cache
from pathlib import Path

from soma_local.errors import ModelFileError


def _byte_level_decoder() -> dict[str, int]:
    """GPT-2's printable stand-ins for the 256 byte values, inverted."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    codes, n = keep[:], 0
    for b in range(256):
        if b not in keep:
            keep.append(b)
            codes.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(keep, codes)}


def _token_text(value) -> str:
    """A special token in tokenizer_config.json: a string or an AddedToken dict."""
    if isinstance(value, dict):
        return value.get("content", "")
    return value or ""


def _uses(decoder: dict | None, kind: str) -> bool:
    if not decoder:
        return False
    if decoder.get("type") == kind:
        return True
    return any(_uses(d, kind) for d in decoder.get("decoders", []) or [])


class HfTokenizer:
    def __init__(self, folder: Path):
        from tokenizers import Tokenizer

        path = folder / "tokenizer.json"
        if not path.is_file():
            raise ModelFileError(f"{folder}: no tokenizer.json (a Hugging Face model folder is needed for its tokenizer)")
        spec = json.loads(path.read_text(encoding="utf-8"))
        self.tok = Tokenizer.from_file(str(path))
        self._lock = threading.Lock()
        self.folder = folder
        config = _read_json(folder / "tokenizer_config.json")
        template = folder / "chat_template.jinja"
        self.chat_template: str | None = (
            template.read_text(encoding="utf-8") if template.is_file() else config.get("chat_template")
        )
        if isinstance(self.chat_template, list):  # several named templates: the default one
            self.chat_template = next((t["template"] for t in self.chat_template if t.get("name") == "default"), None)
        self.bos_token = _token_text(config.get("bos_token"))
        self.eos_token = _token_text(config.get("eos_token"))
        self._added = {t["id"]: t["content"] for t in spec.get("added_tokens", [])}
        self._byte_level = _uses(spec.get("decoder"), "ByteLevel")
        self._bytes = _byte_level_decoder() if self._byte_level else {}
        self.vocab_size = self.tok.get_vocab_size(with_added_tokens=True)
        self.pieces: list[bytes] = [self._piece(i) for i in range(self.vocab_size)]
        # What ends a generation: the tokenizer's EOS and generation_config's (a list in many models).
        eos = _read_json(folder / "generation_config.json").get("eos_token_id")
        ids = set(eos if isinstance(eos, list) else [eos] if eos is not None else [])
        if self.eos_token and self.tok.token_to_id(self.eos_token) is not None:
            ids.add(self.tok.token_to_id(self.eos_token))
        self.eog_ids = frozenset(ids)
        self.newline_ids = [i for i, p in enumerate(self.pieces) if b"\n" in p]
        self._bos_id = self.tok.token_to_id(self.bos_token) if self.bos_token else None
        probe = self.tok.encode("", add_special_tokens=True).ids
        self.adds_bos = self._bos_id is not None and probe[:1] == [self._bos_id]

    def _piece(self, i: int) -> bytes:
        if i in self._added:
            return self._added[i].encode("utf-8")
        token = self.tok.id_to_token(i)
        if token is None:
            return b""
        if self._byte_level:
            return bytes(self._bytes.get(c, 0) for c in token)
        if len(token) == 6 and token.startswith("<0x") and token.endswith(">"):  # sentencepiece byte fallback
            return bytes([int(token[3:5], 16)])
        return token.replace("\u2581", " ").encode("utf-8")

    def encode(self, text: str, *, special: bool = False, add_bos: bool = False) -> list[int]:
        """``special``: special-token text becomes its token (else it is read as plain text)."""
        with self._lock:  # the flag is tokenizer state; concurrent runs share one tokenizer
            self.tok.encode_special_tokens = not special
            ids = self.tok.encode(text, add_special_tokens=False).ids
        if add_bos and self.adds_bos:
            ids = [self._bos_id, *ids]
        return ids

    def decode(self, ids) -> str:
        return b"".join(self.pieces[i] for i in ids).decode("utf-8", errors="replace")


def _read_json(path: Path) -> dict:
    if not path.is_file():
        return {}
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ModelFileError(f"{path}: not valid JSON ({exc.msg})") from None


@lru_cache(maxsize=4)
def load_hf_tokenizer(folder: str) -> HfTokenizer:
    """One tokenizer per folder per process: many in-flight runs share it."""
    return HfTokenizer(Path(folder))
