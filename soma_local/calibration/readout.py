"""Single-run readout (paper §4.1, Appendix B): the outcome under any threshold h, read off one run.

A readout run (``supervise`` with ``mode="readout"`` or ``"readout_no_reminder"``) never takes over,
but at every pause where some finite h would, it produces the takeover continuation on a branch and
records it. A takeover ends a run, so a real run with threshold h is the readout run up to the first
pause where S >= h, followed by that pause's branch. Reading it off is pure bookkeeping over the
trace's records, done here; ``tests/test_readout.py`` checks it against real runs token for token.
"""

from __future__ import annotations

import math
from typing import Iterable, Mapping, Sequence

from pydantic import BaseModel, ConfigDict

from soma_local.errors import DataError
from soma_local.engine.supervise import is_readout
from soma_local.engine.trace import Branch, RunEnd, RunStart, Scan


class ReadOff(BaseModel):
    """What a real run with the given thresholds would have produced."""

    model_config = ConfigDict(extra="forbid", frozen=True, ser_json_inf_nan="strings")

    thresholds: dict[str, float]
    takeover: str | None  # the monitor that took over, None when no threshold was reached
    scan_index: int | None
    thinking_tokens: int
    answer: str  # the answer section (a takeover's prefill included), as ``RunEnd.answer``
    tokens: int  # thinking + answer tokens, the paper's count for the run
    stop: str  # as ``RunEnd.stop``


class ReadoutRun:
    """The records of one readout run, indexed for reading off any number of thresholds."""

    def __init__(self, records: Iterable[BaseModel], source: str = "trace"):
        records = list(records)
        starts = [r for r in records if isinstance(r, RunStart)]
        ends = [r for r in records if isinstance(r, RunEnd)]
        if len(starts) != 1 or len(ends) != 1:
            raise DataError(f"{source}: expected one run_start and one run_end record (an unfinished run?)")
        self.start: RunStart = starts[0]
        self.end: RunEnd = ends[0]
        mode = self.start.settings.get("mode")
        if not is_readout(mode):
            raise DataError(f"{source}: settings.mode is '{mode}', not a readout run (readout, readout_no_reminder)")
        self.source = source
        self.monitors: list[str] = [m["name"] for m in self.start.monitors]
        self.scans: list[Scan] = sorted((r for r in records if isinstance(r, Scan)), key=lambda s: s.index)
        self.branches: dict[tuple[str, int], Branch] = {
            (r.monitor, r.scan_index): r for r in records if isinstance(r, Branch)
        }

    def _takes_over(self, scan: Scan, monitor: str, h: float) -> bool:
        """The controller's takeover test at h (the readout ran at h = inf, so S was never cut)."""
        m = scan.monitors.get(monitor)
        return m is not None and m.p is not None and m.action == "none" and m.score >= h

    def read_off(self, thresholds: Mapping[str, float]) -> ReadOff:
        """The run under per-monitor thresholds; a monitor left out never takes over."""
        unknown = set(thresholds) - set(self.monitors)
        if unknown:
            raise DataError(f"{self.source}: no monitor {sorted(unknown)} in this run (has {self.monitors})")
        for scan in self.scans:
            for name in self.monitors:  # the loop's order: the first monitor that takes over wins
                h = thresholds.get(name, math.inf)
                if math.isfinite(h) and self._takes_over(scan, name, h):
                    branch = self.branches.get((name, scan.index))
                    if branch is None:
                        raise DataError(f"{self.source}: scan {scan.index} reaches h={h} for '{name}' "
                                        "but the trace has no branch for it")
                    return ReadOff(
                        thresholds=dict(thresholds),
                        takeover=name,
                        scan_index=scan.index,
                        thinking_tokens=scan.thinking_tokens,
                        answer=branch.text,
                        tokens=scan.thinking_tokens + branch.generated_tokens,
                        stop="takeover",
                    )
        t = self.end.tokens
        return ReadOff(
            thresholds=dict(thresholds),
            takeover=None,
            scan_index=None,
            thinking_tokens=t.thinking,
            answer=self.end.answer,
            tokens=t.thinking + t.answer,  # the branches' probe tokens are the readout's own cost
            stop=self.end.stop,
        )

    def grid(self, monitor: str, thresholds: Sequence[float]) -> list[ReadOff]:
        """One monitor's outcome at each h of a grid (the other monitors never take over)."""
        return [self.read_off({monitor: h}) for h in thresholds]
