"""The supervise loop: question -> S2 pause -> S1 scan -> controller -> action -> trace.

``supervise`` is the whole data flow in one function; everything it calls is either pure (controller,
state) or a backend behind an interface (S1, S2), so the same loop serves the CLI, the benchmarks and
the single-run readout.
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Literal, Sequence

from soma_local.engine.controller import Action, Controller, Decision
from soma_local.engine.conversation import Task, s1_task
from soma_local.engine.events import Listener
from soma_local.engine.monitors import Monitor
from soma_local.s1.base import S1, S1Query
from soma_local.s2.base import S2Backend, SamplingParams
from soma_local.s2.formats import Prompt, ThinkingFormat, backend_thinking, prompt_for, system_prompt
from soma_local.engine.pauses import PauseRule
from soma_local.engine.session import Pause, Session
from soma_local.engine.trace import (
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

# What a monitor does when its evidence reaches h: take over ("at_h"), nothing ("never": h = inf), or
# produce the takeover on a side branch and go on ("branch"), so that the outcome under any h can be
# read off the one run afterwards (``calibration.readout``).
Takeovers = Literal["at_h", "never", "branch"]
# The run modes by name, as ``soma run --mode`` takes them and traces record them: (reminders, takeovers).
# no_reminder and readout_no_reminder accumulate evidence from the first pause and take over without a
# reminder, with their own calibrated h.
MODES: dict[str, tuple[bool, Takeovers]] = {
    "soma": (True, "at_h"),
    "remind_only": (True, "never"),
    "no_reminder": (False, "at_h"),
    "readout": (True, "branch"),
    "readout_no_reminder": (False, "branch"),
    "scan_only": (False, "never"),
}


def is_readout(mode: str | None) -> bool:
    """Whether a run of this recorded mode holds every takeover on a branch (a readout run)."""
    return mode in MODES and MODES[mode][1] == "branch"


@dataclass
class RunConfig:
    reminders: bool = True
    takeovers: Takeovers = "at_h"
    # h per monitor, as picked above the engine (``calibration.thresholds.resolve_thresholds``: a typed h, the
    # calibration file's, the monitor file's default); a run that takes over at h needs one for each monitor.
    thresholds: dict[str, float] = field(default_factory=dict)
    pause: PauseRule = field(default_factory=PauseRule)
    max_tokens: int = 32768
    thinking: ThinkingFormat | None = None  # None: detect from the GGUF
    sampling: SamplingParams | None = None  # set at the start so a run is reproducible from its seed
    extra_system: str | None = None
    stop: tuple[str, ...] = ()  # the answer ends before the first of these (OpenAI's ``stop``)

    @classmethod
    def of_mode(cls, mode: str, **kwargs) -> "RunConfig":
        reminders, takeovers = MODES[mode]
        return cls(reminders=reminders, takeovers=takeovers, **kwargs)

    @property
    def mode(self) -> str:
        """The mode's name (``MODES``), as the trace records it."""
        return next(name for name, flags in MODES.items() if flags == (self.reminders, self.takeovers))


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
    """The h the monitor's controller takes over at: the one it was given, or inf in a mode that never takes
    over at h. The engine resolves no default: that would be a second place where h is picked."""
    if config.takeovers != "at_h":
        return math.inf
    if monitor.name not in config.thresholds:
        raise ValueError(f"no h for monitor '{monitor.name}' in mode {config.mode}: RunConfig.thresholds needs one "
                         "for each monitor (calibration.thresholds.resolve_thresholds picks them)")
    return config.thresholds[monitor.name]


def _scan(s1: S1 | None, monitors: Sequence[Monitor], task: str, reasoning: str):
    """One S1 batch for all monitors of a pause. A failing S1 costs this scan, never the run."""
    t0 = time.perf_counter()
    try:
        probs = s1.score([S1Query(m.statement, task, reasoning) for m in monitors])
        error = None if all(p is not None for p in probs) else (s1.last_error or "S1 gave no probability")
    except Exception as exc:  # noqa: BLE001 - any S1 failure becomes a missing scan
        probs, error = [None] * len(monitors), f"{type(exc).__name__}: {exc}"
    return probs, error, time.perf_counter() - t0


def _adapted_versions(s1: S1 | None, monitors: Sequence[Monitor]) -> dict[str, str | None]:
    """Monitors whose p passes through an adapter, with the version their h keys on (``S1.version_for``)."""
    if s1 is None:
        return {}
    return {m.name: v for m in monitors if (v := s1.version_for(m.statement)) != s1.version}


def run_prompt(s2: S2Backend, question: Task, config: RunConfig, supervised: bool) -> tuple[ThinkingFormat, Prompt]:
    """The thinking format and the prompt a run of ``question`` gives S2 (its chat template, the system
    prompt, the opening tag); the Python API counts its tokens before it runs."""
    fmt = config.thinking or backend_thinking(s2)
    return fmt, prompt_for(s2, question, fmt=fmt, system=system_prompt(fmt, supervised=supervised,
                                                                         extra=config.extra_system))


def supervise(
    question: Task,
    s2: S2Backend,
    s1: S1 | None,
    monitors: Sequence[Monitor],
    config: RunConfig | None = None,
    trace: TraceWriter | None = None,
    on_event: Listener | None = None,
    cancel: threading.Event | None = None,
) -> RunResult:
    """Run S2 on ``question`` (a question, or a conversation ending with the user's message) under the
    monitors. No monitors (or no S1) is a vanilla run.

    ``config`` carries the mode and, for a mode that takes over at h, each monitor's h (picked by
    ``calibration.thresholds.resolve_thresholds``); the default config has none, so a supervised run
    passes one.

    ``on_event`` hears the run in order (``engine.events``): S2's text as ``Piece``s, ``ThinkingClosed``,
    and every trace record as it is written. ``cancel``, once set, ends the run at the next token with a
    ``run_end`` of stop "cancelled". Ctrl-C (KeyboardInterrupt) also ends the trace with a ``run_end``
    (stop "interrupted"), then propagates.
    """
    config = config or RunConfig()
    trace = trace or TraceWriter(None)
    emit = on_event or (lambda record: None)
    monitors = list(monitors) if s1 is not None else []
    started = time.perf_counter()
    fmt, prompt = run_prompt(s2, question, config, supervised=bool(monitors))
    task = s1_task(question)  # what S1 reads as the task, and the trace records as the question
    controllers = {
        m.name: Controller(_threshold(m, config), remind=config.reminders)
        for m in monitors
    }
    cut = s1.task_cut(task, [m.statement for m in monitors]) if monitors else None
    if config.sampling is not None:
        s2.set_sampling(config.sampling)
    start = RunStart(
        question=task,
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
            "sampling": vars(s2.sampling),
            **({"s1_task_cut": vars(cut)} if cut else {}),
            **({"s1_version": s1.version} if monitors and s1.version else {}),
            **({"s1_adapted": adapted} if (adapted := _adapted_versions(s1, monitors)) else {}),
            **({"stop": list(config.stop)} if config.stop else {}),
        },
        started_at=datetime.now(timezone.utc).isoformat(),
    )
    trace.write(start)
    emit(start)
    session = Session(s2, fmt, max_tokens=config.max_tokens, emit=emit, stop=config.stop,
                      cancel=cancel.is_set if cancel is not None else None)
    loop = _Loop(session, s1, monitors, controllers, config, task, trace, emit)
    try:
        session.start(prompt)
        stop = loop.run()
    except KeyboardInterrupt:
        _end(session, loop, "interrupted", started, trace, emit)
        raise
    end = _end(session, loop, stop, started, trace, emit)
    return RunResult(stop, session.thinking, session.answer, loop.takeover_text, end, trace.records)


def _end(session: Session, loop: "_Loop", stop: str, started: float, trace: TraceWriter, emit: Listener) -> RunEnd:
    session.end_streams()
    timings = Timings(
        wall=time.perf_counter() - started,
        s2_prefill=session.s2_prefill,
        s2_decode=session.s2_decode,
        s1=loop.s1_seconds,
    )
    end = RunEnd(
        stop=stop,
        thinking=session.thinking,
        answer=session.answer,
        output=session.output,
        takeover=loop.takeover_text,
        scans=loop.scans,
        failed_scans=loop.failed,
        reminders=loop.reminders,
        tokens=session.tokens,
        timings=timings,
    )
    trace.write(end)
    emit(end)
    return end


@dataclass
class _Loop:
    """The pause -> scan -> act loop of one run, with the counts ``run_end`` reports (kept on the
    object so that an interrupted run still reports them)."""

    session: Session
    s1: S1 | None
    monitors: list[Monitor]
    controllers: dict[str, Controller]
    config: RunConfig
    task: str
    trace: TraceWriter
    emit: Listener
    s1_seconds: float = 0.0
    scans: int = 0
    failed: int = 0
    reminders: int = 0
    takeover_text: str | None = None

    def write(self, record) -> None:
        self.trace.write(record)
        self.emit(record)

    def run(self) -> str:
        """The run's stop: how it ended, or "cancelled" when its cancel ended it first."""
        stop = self._run()
        return "cancelled" if self.session.cancelled else stop

    def _run(self) -> str:
        session, monitors, config = self.session, self.monitors, self.config
        while True:
            pause = session.think_to_pause(config.pause)
            if pause.cancelled:
                return "cancelled"
            if pause.closed:
                session.write_answer()
                return "answer"
            if pause.limit:
                return "limit"
            if pause.ended:
                # S2 ended without closing thinking (small prompted models do): close it and let it
                # answer, so every run ends with an answer section.
                session.close_thinking("", "", by="engine")
                session.write_answer(max(0, session.remaining))
                return "eos_in_thinking"
            if monitors and self.scan_and_act(pause):
                return "takeover"

    def scan_and_act(self, pause: Pause) -> bool:
        """One S1 batch for every monitor, then the controllers' actions; True when S2 was taken over."""
        session, monitors, config = self.session, self.monitors, self.config
        probs, error, seconds = _scan(self.s1, monitors, self.task, session.thinking)
        self.s1_seconds += seconds
        decisions: dict[str, Decision] = {
            m.name: self.controllers[m.name].update(p) for m, p in zip(monitors, probs)
        }
        self.failed += error is not None
        record = Scan(
            index=self.scans,
            thinking_tokens=session.tokens.thinking,
            thinking_chars=len(session.thinking),
            position=session.backend.position,
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
        self.write(record)
        self.scans += 1

        # ---- control: a takeover ends the run; reminders go in as one paragraph each ----
        chosen = next((m for m in monitors if decisions[m.name].action is Action.TAKEOVER), None)
        if chosen is not None:
            t = chosen.takeover
            self.takeover_text = session.takeover_text(t.conclusion, t.prefill)
            self.write(Takeover(
                monitor=chosen.name,
                scan_index=record.index,
                thinking_tokens=record.thinking_tokens,
                text=self.takeover_text,
            ))
            session.close_thinking(t.conclusion, t.prefill)  # -> ThinkingClosed, the prefill as an answer piece
            session.write_answer(t.max_tokens)
            return True
        if config.takeovers == "branch":
            for m in monitors:
                d = decisions[m.name]
                # Every pause where some finite h would take over: S > 0 without a reminder now.
                if d.action is Action.NONE and d.evidence is not None and d.score > 0:
                    t = m.takeover
                    result = session.branch_takeover(t.conclusion, t.prefill, t.max_tokens)
                    self.write(
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
                self.write(Reminder(monitor=m.name, thinking_tokens=session.tokens.thinking, text=text, tokens=n))
                self.reminders += 1
        return False
