"""The supervise loop: question -> S2 pause -> S1 scan -> controller -> action -> trace.

``supervise`` is the whole data flow in one function; everything it calls is either pure (controller,
state) or a backend behind an interface (S1, S2), so the same loop serves the CLI, the benchmarks and
the single-run readout.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Literal, Sequence

from soma_local.controller import Action, Controller, Decision
from soma_local.monitors import Monitor
from soma_local.s1.base import S1, S1Query
from soma_local.s2.base import OnPiece, S2Backend, SamplingParams
from soma_local.s2.formats import ThinkingFormat, detect_thinking, render_prompt, system_prompt
from soma_local.s2.session import PauseRule, Session
from soma_local.trace import (
    Branch,
    MonitorScan,
    Reminder,
    RunEnd,
    RunStart,
    Scan,
    Takeover,
    Timings,
    TraceWriter,
)

# soma: remind, then take over at h. remind_only: h = infinity. no_reminder: evidence from the first
# pause, take over at h without reminding. readout: remind_only plus every possible takeover produced
# on a branch, so the outcome under any h can be read off afterwards (``readout.py``);
# readout_no_reminder: the same for the no_reminder variant (which calibrates its own h).
Mode = Literal["soma", "remind_only", "no_reminder", "readout", "readout_no_reminder"]
READOUT_MODES = ("readout", "readout_no_reminder")


@dataclass
class RunConfig:
    mode: Mode = "soma"
    thresholds: dict[str, float] = field(default_factory=dict)  # per monitor; default from the file
    pause: PauseRule = field(default_factory=PauseRule)
    max_tokens: int = 32768
    thinking: ThinkingFormat | None = None  # None: detect from the GGUF
    sampling: SamplingParams | None = None  # set at the start so a run is reproducible from its seed
    extra_system: str | None = None


@dataclass
class RunResult:
    stop: str
    thinking: str
    answer: str
    takeover: str | None
    end: RunEnd
    records: list = field(default_factory=list)


def reminder_paragraph(monitor: Monitor) -> str:
    """A separate paragraph in S2's context; the pause has just ended a line."""
    return f"\n<reminder>{monitor.reminder}</reminder>\n\n"


def _threshold(monitor: Monitor, config: RunConfig) -> float:
    if config.mode == "remind_only" or config.mode in READOUT_MODES:
        return math.inf
    return config.thresholds.get(monitor.name, monitor.default_threshold)


def _scan(s1: S1 | None, monitors: Sequence[Monitor], task: str, reasoning: str):
    """One S1 batch for all monitors of a pause. A failing S1 costs this scan, never the run."""
    t0 = time.perf_counter()
    try:
        probs = s1.score([S1Query(m.statement, task, reasoning) for m in monitors])
        error = None if all(p is not None for p in probs) else (s1.last_error or "S1 gave no probability")
    except Exception as exc:  # noqa: BLE001 - any S1 failure becomes a missing scan
        probs, error = [None] * len(monitors), f"{type(exc).__name__}: {exc}"
    return probs, error, time.perf_counter() - t0


def supervise(
    question: str,
    s2: S2Backend,
    s1: S1 | None,
    monitors: Sequence[Monitor],
    config: RunConfig | None = None,
    trace: TraceWriter | None = None,
    on_piece: OnPiece | None = None,
    on_event=None,
) -> RunResult:
    """Run S2 on ``question`` under the monitors. No monitors (or no S1) is a vanilla run."""
    config = config or RunConfig()
    trace = trace or TraceWriter(None)
    emit = on_event or (lambda record: None)
    monitors = list(monitors) if s1 is not None else []
    started = time.perf_counter()
    fmt = config.thinking or detect_thinking(s2.chat_template or "", s2.is_single_token("</think>"))
    prompt = render_prompt(
        s2.chat_template,
        model_path=s2.name,
        user=question,
        system=system_prompt(fmt, supervised=bool(monitors), extra=config.extra_system),
        fmt=fmt,
        bos_token=s2.bos_token,
        eos_token=s2.eos_token,
    )
    controllers = {
        m.name: Controller(_threshold(m, config), remind=config.mode not in ("no_reminder", "readout_no_reminder"))
        for m in monitors
    }
    trace.write(
        RunStart(
            question=question,
            s2_model=s2.name,
            s1=s1.name if s1 is not None and monitors else "none",
            monitors=[m.model_dump() for m in monitors],
            thresholds={k: c.threshold for k, c in controllers.items()},
            settings={
                "mode": config.mode,
                "scan_interval": config.pause.interval,
                "line_break_slack": config.pause.slack,
                "max_tokens": config.max_tokens,
                "thinking": fmt.mode,
                "sampling": vars(getattr(s2, "sampling", None) or {}),
            },
            started_at=datetime.now(timezone.utc).isoformat(),
        )
    )
    if config.sampling is not None:
        s2.set_sampling(config.sampling)
    session = Session(s2, fmt, max_tokens=config.max_tokens, on_piece=on_piece)
    session.start(prompt)
    s1_seconds, scans, failed, reminders = 0.0, 0, 0, 0
    takeover_text: str | None = None
    stop = "answer"

    while True:
        pause = session.think_to_pause(config.pause)
        if pause.closed:
            session.write_answer()
            break
        if pause.limit:
            stop = "limit"
            break
        if pause.ended:
            # S2 ended without closing thinking (small prompted models do): close it and let it
            # answer, so every run ends with an answer section.
            session.takeover("", "", max_tokens=max(0, session.remaining))
            stop = "eos_in_thinking"
            break
        if not monitors:
            continue

        # ---- S1 scan: one batch for every monitor ----
        probs, error, seconds = _scan(s1, monitors, question, session.thinking)
        s1_seconds += seconds
        decisions: dict[str, Decision] = {m.name: controllers[m.name].update(p) for m, p in zip(monitors, probs)}
        failed += error is not None
        record = Scan(
            index=scans,
            thinking_tokens=session.tokens.thinking,
            position=s2.position,
            at_line_break=pause.at_line_break,
            monitors={
                name: MonitorScan(
                    p=p, evidence=d.evidence, score=d.score, action=d.action.value, in_episode=d.in_episode
                )
                for (name, d), p in zip(decisions.items(), probs)
            },
            s1_seconds=seconds,
            error=error,
        )
        trace.write(record)
        emit(record)
        scans += 1

        # ---- control: a takeover ends the run; reminders go in as one paragraph each ----
        chosen = next((m for m in monitors if decisions[m.name].action is Action.TAKEOVER), None)
        if chosen is not None:
            t = chosen.takeover
            takeover_text = session.takeover(t.conclusion, t.prefill, t.max_tokens)
            event = Takeover(
                monitor=chosen.name,
                scan_index=record.index,
                thinking_tokens=record.thinking_tokens,
                text=takeover_text,
            )
            trace.write(event)
            emit(event)
            stop = "takeover"
            break
        if config.mode in READOUT_MODES:
            for m in monitors:
                d = decisions[m.name]
                # Every pause where some finite h would take over: S > 0 without a reminder now.
                if d.action is Action.NONE and d.evidence is not None and d.score > 0:
                    t = m.takeover
                    result = session.branch_takeover(t.conclusion, t.prefill, t.max_tokens)
                    trace.write(
                        Branch(
                            monitor=m.name,
                            scan_index=record.index,
                            thinking_tokens=record.thinking_tokens,
                            text=result.text,
                            inserted_tokens=result.inserted,
                            generated_tokens=result.generated,
                        )
                    )
        for m in monitors:
            if decisions[m.name].action is Action.REMIND:
                text = reminder_paragraph(m)
                n = session.insert(text)
                event = Reminder(monitor=m.name, thinking_tokens=session.tokens.thinking, text=text, tokens=n)
                trace.write(event)
                emit(event)
                reminders += 1

    timings = Timings(
        wall=time.perf_counter() - started,
        s2_prefill=session.s2_prefill,
        s2_decode=session.s2_decode,
        s1=s1_seconds,
    )
    end = RunEnd(
        stop=stop,
        thinking=session.thinking,
        answer=session.answer,
        output=session.output,
        takeover=takeover_text,
        scans=scans,
        failed_scans=failed,
        reminders=reminders,
        tokens=session.tokens,
        timings=timings,
    )
    trace.write(end)
    emit(end)
    return RunResult(stop, session.thinking, session.answer, takeover_text, end, trace.records)
