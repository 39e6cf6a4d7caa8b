"""Cut S1 states out of finished traces at the paper's scan schedule.

The engine pauses after every 256 thinking tokens at the next line break, or 128 tokens later if no
line break comes (``PauseRule``). Replaying that rule over a recorded trace gives exactly the states
a live S1 would have been shown, so the classifier trains on the distribution it serves. Tokens are
counted with the embedded default S2's tokenizer (the traces' own Qwen3 / R1 tokenizers are not
offline); both are byte-level BPEs of similar granularity, so the cut points land about where the
originals' would.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

from soma_local.s2.session import PauseRule
from training.traces import Trace

Pieces = Callable[[str], list[str]]


def scan_cuts(pieces: Sequence[str], rule: PauseRule = PauseRule()) -> list[int]:
    """Character offsets where the engine would pause, given the text's token pieces in order.

    A pause falls after the first piece containing a line break once ``interval`` tokens have passed
    since the last pause, or after ``interval + slack`` tokens without one. The end of thinking is
    not a pause (S1 stops scanning once S2 closes its thinking).
    """
    cuts: list[int] = []
    offset = 0
    since = 0
    for piece in pieces:
        offset += len(piece)
        since += 1
        if since >= rule.interval and ("\n" in piece or since >= rule.interval + rule.slack):
            cuts.append(offset)
            since = 0
    total = sum(len(p) for p in pieces)
    return [c for c in cuts if c < total]


@dataclass(frozen=True)
class Cut:
    trace: Trace
    index: int  # scan number within the trace
    end: int  # character offset of the cut in ``trace.thinking``

    @property
    def reasoning(self) -> str:
        return self.trace.thinking[: self.end]

    @property
    def key(self) -> str:
        return f"{self.trace.trace_id}@{self.end}"


def trace_cuts(trace: Trace, pieces: Pieces, rule: PauseRule = PauseRule()) -> list[Cut]:
    return [Cut(trace, i, end) for i, end in enumerate(scan_cuts(pieces(trace.thinking), rule))]


def s2_pieces(gguf_path: str) -> Pieces:
    """Token pieces of a text in a GGUF's tokenizer (vocabulary only: no weights are loaded)."""
    import llama_cpp

    llm = llama_cpp.Llama(model_path=str(gguf_path), vocab_only=True, verbose=False)
    cache: dict[int, bytes] = {}

    def pieces(text: str) -> list[str]:
        ids = llm.tokenize(text.encode("utf-8"), add_bos=False, special=False)
        raw = [cache.setdefault(t, llm.detokenize([t])) for t in ids]
        # Byte-level pieces can split a UTF-8 character; decode cumulatively so lengths add up.
        out, buf = [], b""
        for chunk in raw:
            buf += chunk
            try:
                out.append(buf.decode("utf-8"))
                buf = b""
            except UnicodeDecodeError:
                out.append("")
        return out

    return pieces
