"""Cut S1 states out of finished traces at the engine's own scan schedule (``engine.pauses``).

The same function as the live loop and replay decides every cut, so the S1 trains on exactly the
states the engine shows it. Tokens are counted with the embedded default S2's tokenizer (the traces'
own Qwen3 / R1 tokenizers are not offline), as replay counts them.
"""

from __future__ import annotations

from dataclasses import dataclass

from soma_local.calibration.recorded import RecordedTrace
from soma_local.engine.pauses import PauseRule, cut_offsets, pause_points
from soma_local.s2.model_files import GgufVocab


def scan_cut_points(thinking: str, vocab: GgufVocab, rule: PauseRule = PauseRule()) -> list[tuple[int, int]]:
    """(character offset into ``thinking``, thinking tokens before it) where the live loop would pause."""
    pieces = vocab.pieces(thinking)
    raw = thinking.encode("utf-8")
    points = pause_points(pieces, rule)
    return [(len(raw[:b].decode("utf-8", errors="ignore")), n) for b, n in zip(cut_offsets(pieces, points), points)]


def scan_cuts(thinking: str, vocab: GgufVocab, rule: PauseRule = PauseRule()) -> list[int]:
    """Character offsets into ``thinking`` where the live loop would pause."""
    return [c for c, _ in scan_cut_points(thinking, vocab, rule)]


@dataclass(frozen=True)
class Cut:
    trace: RecordedTrace
    index: int  # scan number within the trace
    end: int  # character offset of the cut in ``trace.thinking``

    @property
    def reasoning(self) -> str:
        return self.trace.thinking[: self.end]

    @property
    def key(self) -> str:
        return f"{self.trace.trace_id}@{self.end}"


def trace_cuts(trace: RecordedTrace, vocab: GgufVocab, rule: PauseRule = PauseRule()) -> list[Cut]:
    return [Cut(trace, i, end) for i, end in enumerate(scan_cuts(trace.thinking, vocab, rule))]
