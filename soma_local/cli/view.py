"""What ``soma run`` shows while a run goes: the header, S2's thinking, each scan, reminders, a
takeover, the answer once, a summary; or, for scripts, nothing but the answer and a JSON line.

The view only reads the run's events (``Supervisor.run``'s ``on_event``); it never changes what S2 or
S1 do, so a quiet run and a verbose one are the same run.
"""

from __future__ import annotations

import json
import math
import os
from typing import Mapping, TextIO

from soma_local.calibration.thresholds import ThresholdSource
from soma_local.engine.events import Piece, ThinkingClosed
from soma_local.engine.trace import Reminder, RunStart, Scan, Takeover
from soma_local.supervisor import SupervisedRun

GUIDE = (
    "p: S1's probability that a monitor's statement holds now | S: evidence summed over scans "
    "(log-odds, never below 0) | first S > 0: a reminder | S >= h after a reminder: takeover"
)


def stated_answer(run: SupervisedRun) -> tuple[str | None, str | None]:
    """The final answer S2 stated and where: in its answer section, else (small models often answer
    inside their thinking and then stop) in its thinking. (None, None) when it stated none."""
    from soma_local.calibration.scoring import extract_answer

    for where, text in (("answer", run.answer), ("thinking", run.thinking)):
        found = extract_answer(text)
        if found:
            return found, where
    return None, None


class Style:
    """ANSI styling only for a terminal that wants it (NO_COLOR and non-TTY get plain text)."""

    def __init__(self, stream: TextIO) -> None:
        self.on = stream.isatty() and not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb"

    def __call__(self, text: str, code: str) -> str:
        return f"\033[{code}m{text}\033[0m" if self.on else text


def h_text(h: float) -> str:
    return "inf" if math.isinf(h) else f"{h:g}"


class LiveView:
    def __init__(self, out: TextIO, err: TextIO, *, quiet: bool = False) -> None:
        self.out, self.err, self.quiet = out, err, quiet
        self.style = Style(out)
        self._answering = False
        self._line_start = True  # the cursor is at the start of a line
        self._answer_started = False
        self._prefilled = False  # the answer's first piece is the engine's prefill

    # ---- before the run -----------------------------------------------------------------------
    def header(self, question: str, description: str, thresholds: Mapping[str, ThresholdSource],
               fixed_h: str | None) -> None:
        """The question, the models, each h and where it came from (``fixed_h``: the mode sets h). An h's
        warning came before, from the supervisor (``warn``)."""
        if self.quiet:
            return
        s = self.style
        shown = question if len(question) <= 600 else f"{question[:500]} ... ({len(question):,} characters)"
        self._print(s(f"question: {shown}", "1"))
        self._print(s(description, "2"))
        if thresholds:
            hs = " | ".join(
                f"{name} {fixed_h or h_text(t.h)} ({'mode' if fixed_h else t.describe()})" for name, t in thresholds.items()
            )
            self._print(s(f"takeover thresholds h: {hs}", "2"))
            self._print(s(GUIDE, "2"))

    def warn(self, text: str) -> None:
        self._end_line()
        print(f"soma: warning: {text}", file=self.err, flush=True)

    def prompt_progress(self, done: int, total: int) -> None:
        """Decoding a long prompt can take minutes on a CPU: say how far it is."""
        if self.quiet:
            return
        end = "\n" if done >= total else ""
        self.err.write(f"\rloading the prompt into S2: {done:,}/{total:,} tokens{end}")
        self.err.flush()

    # ---- during the run -----------------------------------------------------------------------
    def on_piece(self, piece: Piece) -> None:
        text = piece.text
        if self.quiet:
            return
        if self._answering and not self._answer_started:
            text = text if self._prefilled else text.lstrip()  # a prefill is shown as S2 read it
            if not text:
                return
            self._answer_started = True
        self._write(self.style(text, "0" if self._answering else "2"))
        self._line_start = text.endswith("\n")

    def on_event(self, record) -> None:
        if isinstance(record, Piece):
            self.on_piece(record)
            return
        if self.quiet:
            return
        s = self.style
        if isinstance(record, RunStart):
            cut = record.settings.get("s1_task_cut")
            if cut:
                self.warn(f"the task is {cut['task_tokens']:,} S1 tokens: S1 reads {cut['kept_tokens']:,} of them "
                          f"(its beginning and end) so that a third of its input stays for the newest reasoning")
            self._print(s("<think>", "2"))
        elif isinstance(record, Scan):
            cells = " | ".join(
                f"{name} p={'--' if m.p is None else f'{m.p:.2f}'} S={m.score:.2f}"
                + ("" if m.action == "none" else f" -> {m.action}")
                for name, m in record.monitors.items()
            )
            line = f"[scan {record.index + 1} @ {record.thinking_tokens} tok] {cells}"
            if record.error:
                line += f"  (S1 failed: {record.error})"
            self._end_line()
            self._print(s(line, "36"))
        elif isinstance(record, Reminder):
            self._end_line()
            self._print(s(f"[reminder · {record.monitor}] {record.text.strip()}", "33;1"))
        elif isinstance(record, Takeover):
            self._end_line()
            head, _, _ = record.text.partition("</think>")
            said = f": {head.strip()}" if head.strip() else ""
            self._print(s(f"[takeover · {record.monitor}] thinking closed by the engine{said}", "31;1"))
        elif isinstance(record, ThinkingClosed):
            if record.by == "s2":  # S2's own tag, never part of the thinking pieces
                self._write(s("</think>", "2"))
                self._line_start = False
            self._end_line()
            if record.by == "engine":
                self._print(s("</think>", "2") + s("  (S2 stopped without closing thinking; the engine closed it)", "2"))
            elif record.by == "takeover":
                self._print(s("</think>", "2"))
            self._write(s("answer: ", "1"))
            self._prefilled = bool(record.prefill)  # the next piece is the prefill: written as it is
            self._answering = True
            self._line_start = False

    # ---- after the run ------------------------------------------------------------------------
    def summary(self, run: SupervisedRun) -> None:
        if self.quiet:
            self._print(run.answer.strip() or "(no answer)")
            return
        if not self._answering:  # the limit came first: no answer section
            self._end_line()
            self._print(self.style("answer: (none: the token limit came before the answer)", "1"))
        self._end_line()
        value, where = stated_answer(run)
        if value is not None:
            note = "" if where == "answer" else " (stated in its thinking)"
            self._print(self.style(f"final answer: {value}{note}", "1"))
        self._print(self.style(run.story(), "1"))
        t, tm = run.tokens, run.timings
        share = lambda x: f"{100 * x / tm.wall:.0f}%" if tm.wall > 0 else "-"  # noqa: E731
        self._print(self.style(
            f"stop={run.stop} | tokens: thinking {t.thinking}, answer {t.answer}, inserted {t.inserted}, "
            f"probe {t.probe} | scans {len(run.scans)} (failed {run.failed_scans}), reminders {len(run.reminders)}, "
            f"takeover {run.takeover is not None} | time {tm.wall:.1f}s: S2 "
            f"{share(tm.s2_decode + tm.s2_prefill)}, S1 {share(tm.s1)}, loop {share(tm.loop)} | "
            f"decode {t.thinking + t.answer + t.probe} tok in {tm.s2_decode:.1f}s", "1"))

    def interrupted(self, trace: str | None) -> None:
        self._end_line()
        where = f"; the trace ends with run_end stop=interrupted: {trace}" if trace else ""
        print(f"soma: interrupted (Ctrl-C){where}", file=self.err, flush=True)

    # ---- output helpers -----------------------------------------------------------------------
    def _write(self, text: str) -> None:
        self.out.write(text)
        self.out.flush()

    def _print(self, text: str) -> None:
        self._write(text + "\n")
        self._line_start = True

    def _end_line(self) -> None:
        if not self._line_start:
            self._write("\n")
            self._line_start = True


def json_summary(run: SupervisedRun) -> str:
    """One JSON line for scripts: the outcome, the counts and where the trace is (h = inf as "inf")."""
    value, where = stated_answer(run)
    payload = {
        "stop": run.stop,
        "answer": run.answer.strip(),
        "final_answer": value,
        "final_answer_in": where,
        "takeover": run.takeover.monitor if run.takeover is not None else None,
        "scans": len(run.scans),
        "failed_scans": run.failed_scans,
        "reminders": len(run.reminders),
        "tokens": run.tokens.model_dump(),
        "seconds": round(run.timings.wall, 3),
        "thresholds": {name: {"h": h_text(t.h), "source": t.source, **({"evidence": t.evidence} if t.evidence else {})}
                       for name, t in run.threshold_sources.items()},
        "trace": run.trace,
    }
    return json.dumps(payload, ensure_ascii=False)
