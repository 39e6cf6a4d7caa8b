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
