"""What the Python API returns for one supervised run: the trace's records and counts, typed."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from soma_local.calibration.thresholds import ThresholdSource
from soma_local.engine.supervise import RunResult
from soma_local.engine.trace import Branch, Reminder, Scan, Takeover, Timings, TokenCounts


class SupervisedRun(BaseModel):
    """One run's outcome. ``stop``: "answer", "takeover", "limit", "eos_in_thinking", "cancelled" or
    "interrupted"; ``answer`` is everything after thinking closed (a takeover's prefill included), up to
    the first stop string; ``thresholds`` the h each monitor's controller used (inf: never takes over
    in this mode) and ``threshold_sources`` where each came from."""

    model_config = ConfigDict(ser_json_inf_nan="strings")

    stop: str
    answer: str
    thinking: str
    output: str = ""  # the whole text S2 saw after the prompt, reminders and takeover text in place
    scans: list[Scan] = Field(default_factory=list)
    reminders: list[Reminder] = Field(default_factory=list)
    takeover: Takeover | None = None
    branches: list[Branch] = Field(default_factory=list)  # readout modes: every possible takeover
    tokens: TokenCounts = Field(default_factory=TokenCounts)
    timings: Timings = Field(default_factory=Timings)
    mode: str = "soma"
    thresholds: dict[str, float] = Field(default_factory=dict)
    threshold_sources: dict[str, ThresholdSource] = Field(default_factory=dict)
    s1: str = "none"
    s2: str = ""
    trace: str | None = None

    @property
    def failed_scans(self) -> int:
        return sum(scan.error is not None for scan in self.scans)

    def story(self) -> str:
        """What supervision did, in words a newcomer reads at a glance: "looping reminded at 558 tokens;
        looping took over at 1373; S2 answered in 12 tokens". Token counts are S2's thinking tokens when
        it happened (the trace's ``thinking_tokens``)."""
        events = [(r.thinking_tokens, f"{r.monitor} reminded at {r.thinking_tokens} tokens") for r in self.reminders]
        if self.takeover is not None:
            events.append((self.takeover.thinking_tokens,
                           f"{self.takeover.monitor} took over at {self.takeover.thinking_tokens} tokens"))
        said = [text for _, text in sorted(events, key=lambda e: e[0])] or ["no monitor acted"]
        t = self.tokens
        ending = {
            "answer": f"S2 concluded at {t.thinking} tokens and answered in {t.answer}",
            "eos_in_thinking": f"S2 stopped at {t.thinking} tokens without closing its thinking and answered in {t.answer}",
            "takeover": f"S2 answered in {t.answer} tokens" if t.answer else "S2 wrote nothing after the takeover",
            "limit": f"S2 reached the {t.thinking + t.answer}-token limit without an answer",
            "cancelled": f"the run was cancelled at {t.thinking + t.answer} tokens",
            "interrupted": f"the run was interrupted at {t.thinking + t.answer} tokens",
        }.get(self.stop, f"the run ended ({self.stop})")
        return "; ".join(said + [ending])

    @classmethod
    def of(cls, result: RunResult, sources: dict[str, ThresholdSource], trace: str | None) -> "SupervisedRun":
        start, end = result.records[0], result.end
        kinds = {kind: [r for r in result.records if isinstance(r, kind)] for kind in (Scan, Reminder, Takeover, Branch)}
        return cls(
            stop=end.stop, answer=end.answer, thinking=end.thinking, output=end.output,
            scans=kinds[Scan], reminders=kinds[Reminder], takeover=next(iter(kinds[Takeover]), None),
            branches=kinds[Branch], tokens=end.tokens, timings=end.timings, mode=start.settings["mode"],
            thresholds=start.thresholds, threshold_sources=sources, s1=start.s1, s2=start.s2_model, trace=trace,
        )
