"""``Supervisor``: S2, S1 and the monitors loaded once, then any number of supervised runs.

The one wiring of a supervised run, for ``soma run``, the Python API and the chat server: S2 from its
options, S1 on S2's tokenizer with its monitors' adapters, each run's h by the one precedence
(``calibration.thresholds.resolve_thresholds``), the run itself (``engine.supervise``), and closing
S2 and S1 on every path. An HTTP S2 (vLLM) may hold several sessions, one run in flight on each, their
S1 scans batched (``BatchedS1``); the in-process llama.cpp S2 holds one, so runs take turns.
"""

from __future__ import annotations

import queue
import threading
from contextlib import ExitStack
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

from pydantic import ValidationError

from soma_local.calibration.thresholds import ThresholdSource, open_calibration, resolve_thresholds
from soma_local.engine.conversation import Task
from soma_local.engine.events import Listener
from soma_local.engine.monitors import Monitor, resolve_monitors
from soma_local.engine.pauses import PauseRule
from soma_local.engine.supervise import MODES, RunConfig, run_prompt, supervise
from soma_local.engine.trace import TraceWriter
from soma_local.errors import MonitorFileError, PromptTooLong, RequestError, SomaError
from soma_local.jsonl import field_errors
from soma_local.s1.base import S1
from soma_local.s1.factory import DEFAULT_S1, check_spec
from soma_local.s2.base import CONTEXT_MARGIN, S2Backend
from soma_local.s2.build import RUNTIMES, S2Options, build_s2
from soma_local.s2.formats import prompt_ids
from soma_local.supervisor.loading import Warn, load_run_s1, prepare_s1, stderr_warning
from soma_local.supervisor.request import RunRequest, check_thresholds, pick_monitors
from soma_local.supervisor.result import SupervisedRun
from soma_local.supervisor.streaming import Event, stream_events
from soma_local.threads import default_threads

DEFAULT_MONITORS = ("overthinking", "unanswerable")


@dataclass(frozen=True)
class _Plan:
    """One request, checked and turned into what the engine runs."""

    task: Task
    monitors: list[Monitor]
    config: RunConfig
    sources: dict[str, ThresholdSource]


def _s2_options(s2_model: str | None, options: Mapping[str, Any]) -> S2Options:
    values = {k: str(v) if isinstance(v, Path) else v for k, v in options.items()}
    try:
        return S2Options(s2_model=s2_model, **values)
    except ValidationError as exc:
        raise SomaError(f"Supervisor S2 options: {field_errors(exc)} (options: {', '.join(S2Options.model_fields)})") from None


def _monitors(specs: Sequence[str | Path | Monitor]) -> list[Monitor]:
    """Monitor objects as given, names and .toml paths loaded; names must be unique."""
    loaded = iter(resolve_monitors([str(s) for s in specs if not isinstance(s, Monitor)]))
    monitors = [s if isinstance(s, Monitor) else next(loaded) for s in specs]
    names = [m.name for m in monitors]
    if len(set(names)) != len(names):
        raise MonitorFileError(f"monitor names must be unique, got: {', '.join(names)}")
    return monitors


class Supervisor:
    """S2 supervised by S1 under monitors, loaded once; ``run`` and ``stream`` supervise one request each.

    ``s2_model`` and any ``S2Options`` field by keyword (``s2="llama_cpp"`` or ``"vllm:URL"``, ``n_ctx``,
    ``n_gpu_layers``, ``flash_attn``, ``threads``, ``temperature``, ``top_p``, ``top_k``, ``seed``,
    ``chat_template``, ``s2_timeout``) build S2; ``s1`` is a spec as ``--s1`` takes it, an S1 object (the
    caller's: not closed here) or None; ``monitors`` are names, .toml paths or ``Monitor`` objects;
    ``thresholds`` are h by monitor (as ``--threshold``), before ``calibration``'s and the monitors' own.
    Everything is checked before any model loads."""

    def __init__(self, s2_model: str | None = None, *, s1: str | S1 | None = DEFAULT_S1,
                 monitors: Sequence[str | Path | Monitor] = DEFAULT_MONITORS,
                 thresholds: Mapping[str, float] | None = None, calibration: str | Path | None = None,
                 mode: str = "soma", adapters: bool = True, scan_interval: int = 256, line_break_slack: int = 128,
                 max_tokens: int | None = None, concurrency: int = 1, s1_temperature: float | None = None,
                 warn: Warn = stderr_warning, prompt_progress: Callable[[int, int], None] | None = None,
                 **s2_options: Any) -> None:
        self._backends: list[S2Backend] = []
        self._s1: S1 | None = None
        self._owns_s1 = isinstance(s1, str)
        self._closed = False
        options = _s2_options(s2_model, s2_options)
        if mode not in MODES:
            raise RequestError(f"unknown mode '{mode}' (known: {', '.join(MODES)})")
        if concurrency < 1 or (concurrency > 1 and not RUNTIMES[options.runtime].concurrent):
            raise SomaError(f"concurrency {concurrency}: runs in flight at once need an S2 server (s2='vllm:URL'); "
                            "in-process llama.cpp runs one at a time (concurrency=1)")
        if scan_interval < 1 or line_break_slack < 0 or (max_tokens is not None and max_tokens < 1):
            raise SomaError("scan_interval and max_tokens must be > 0, line_break_slack >= 0")
        if isinstance(s1, str):
            check_spec(s1)
        self.monitors = _monitors(monitors)
        self._flags = check_thresholds(thresholds or {}, self.monitor_names)
        self._cal, self._cal_path = open_calibration(str(calibration) if calibration else None)
        self.mode, self.max_tokens, self.concurrency = mode, max_tokens, concurrency
        self._pause = PauseRule(scan_interval, line_break_slack)
        self.threads = options.threads or default_threads()
        self._options = options.model_copy(update={"threads": self.threads})
        with ExitStack() as undo:  # a failure while loading closes whatever had loaded
            undo.callback(self.close)
            for server in range(concurrency):  # one at a time: those built before a failure are closed
                self._backends.append(build_s2(self._options, server=server))
                self._backends[-1].prompt_progress = prompt_progress
            ready = dict(adapters=adapters, batched=concurrency > 1, warn=warn)
            if isinstance(s1, str):
                self._s1, self.adapted = load_run_s1(s1, self.monitors, temperature=s1_temperature, threads=self.threads,
                                                     n_gpu_layers=self._options.n_gpu_layers,
                                                     tokenizer=self._backends[0], **ready)
            else:
                self._s1, self.adapted = prepare_s1(s1, self.monitors, **ready)
            undo.pop_all()
        self._free: queue.SimpleQueue[S2Backend] = queue.SimpleQueue()
        for backend in self._backends:
            self._free.put(backend)
        self._counting = threading.Lock()
        self.threshold_sources = self._thresholds(self.monitors, {}, mode)
        for source in self.threshold_sources.values():
            if source.warning and MODES[mode][1] == "at_h":
                warn(source.warning)

    # ---- what a server asks before it runs anything ------------------------------------------------
    @property
    def monitor_names(self) -> list[str]:
        return [m.name for m in self.monitors]

    @property
    def s2_name(self) -> str:
        return self._backends[0].name

    @property
    def s1_name(self) -> str:
        return "none" if self._s1 is None else self._s1.name

    @property
    def context_size(self) -> int:
        """S2's context in tokens: the prompt and everything generated after it."""
        return self._backends[0].context_size

    def prompt_tokens(self, question: str | None = None, *, messages: Sequence[Mapping[str, str]] | None = None,
                      monitors: Sequence[str] | None = None) -> int:
        """Tokens of the prompt S2 would read for this request (the chat template and the run's system text
        included), so that a request too long for ``context_size`` can be refused before it queues."""
        request = RunRequest.of(question=question, messages=messages, monitors=monitors)
        self._check_open()
        return self._count(request.task, self._supervised(pick_monitors(request.monitors, self.monitor_names)),
                           RunConfig())

    # ---- runs --------------------------------------------------------------------------------------
    def run(self, question: str | None = None, *, messages: Sequence[Mapping[str, str]] | None = None,
            seed: int | None = None, temperature: float | None = None, top_p: float | None = None,
            max_tokens: int | None = None, stop: str | Sequence[str] | None = None,
            monitors: Sequence[str] | None = None, thresholds: Mapping[str, float] | None = None,
            mode: str | None = None, trace: str | Path | None = None, on_event: Listener | None = None,
            cancel: threading.Event | None = None) -> SupervisedRun:
        """Supervise S2 on ``question`` (or ``messages``, a conversation ending with the user's message).

        ``seed``, ``temperature``, ``top_p``, ``max_tokens``, ``mode`` override the supervisor's for this
        run; ``stop`` strings end the answer before the first of them; ``monitors`` is a subset of the
        supervisor's by name, ``thresholds`` h by monitor for this run (before every other source);
        ``trace`` a JSONL path the run's trace is written to; ``on_event`` hears every event in order
        (``Event``); ``cancel``, once set, ends the run at the next token (stop "cancelled"). Runs on an
        HTTP S2 may come from many threads at once; on llama.cpp they take turns."""
        request = RunRequest.of(question=question, messages=messages, seed=seed, temperature=temperature,
                                top_p=top_p, max_tokens=max_tokens, stop=stop, monitors=monitors,
                                thresholds=thresholds, mode=mode)
        return self._run(self._plan(request), trace, on_event, cancel)

    def stream(self, question: str | None = None, *, trace: str | Path | None = None,
               on_event: Listener | None = None, cancel: threading.Event | None = None,
               **request: Any) -> Iterator[Event | SupervisedRun]:
        """``run``'s events as they happen (those ``on_event`` hears), then its ``SupervisedRun``; it takes
        ``run``'s arguments. The request is checked now; the run starts with the iteration, and stopping
        the iteration early cancels it."""
        plan = self._plan(RunRequest.of(question=question, **request))

        def start(listen: Listener, stop: threading.Event) -> SupervisedRun:
            both = listen if on_event is None else lambda event: (on_event(event), listen(event))
            return self._run(plan, trace, both, stop)

        return stream_events(start, cancel)

    def _plan(self, request: RunRequest) -> _Plan:
        self._check_open()
        names = pick_monitors(request.monitors, self.monitor_names)
        monitors = [m for m in self.monitors if m.name in names]
        mode = request.mode or self.mode
        sources = self._thresholds(monitors, check_thresholds(request.thresholds, names), mode)
        base = self._options.sampling
        sampling = replace(base, **{k: v for k, v in (("seed", request.seed), ("temperature", request.temperature),
                                                       ("top_p", request.top_p)) if v is not None})
        config = RunConfig.of_mode(
            mode,
            thresholds={name: t.h for name, t in sources.items()},
            pause=self._pause,
            max_tokens=request.max_tokens or self.max_tokens or self.context_size,  # default: what the context leaves
            sampling=sampling,
            stop=tuple(request.stop),
        )
        tokens, room = self._count(request.task, self._supervised(names), config), self.context_size - CONTEXT_MARGIN
        if tokens >= room:
            raise PromptTooLong(f"the prompt is {tokens:,} tokens: S2's context of {self.context_size:,} tokens leaves "
                                "no room to think and answer (shorten the prompt, or give S2 a larger context)",
                                tokens, self.context_size)
        return _Plan(request.task, monitors, config, sources)

    def _run(self, plan: _Plan, trace: str | Path | None, on_event: Listener | None,
             cancel: threading.Event | None) -> SupervisedRun:
        self._check_open()
        backend = self._free.get()  # a free S2 session; with one (llama.cpp), runs take turns here
        try:
            with TraceWriter(trace) as writer:
                result = supervise(plan.task, backend, self._s1, plan.monitors, plan.config, writer,
                                   on_event=on_event, cancel=cancel)
        finally:
            self._free.put(backend)
        return SupervisedRun.of(result, plan.sources, str(trace) if trace else None)

    def _check_open(self) -> None:
        if self._closed:
            raise SomaError("this Supervisor is closed: its S2 and S1 are released")

    def _supervised(self, names: Sequence[str]) -> bool:
        return self._s1 is not None and bool(names)

    def _count(self, task: Task, supervised: bool, config: RunConfig) -> int:
        backend = self._backends[0]
        with self._counting:
            return len(prompt_ids(backend, run_prompt(backend, task, config, supervised)[1]))

    def _thresholds(self, monitors: Sequence[Monitor], flags: Mapping[str, float],
                    mode: str) -> dict[str, ThresholdSource]:
        """Each monitor's h for a run of ``mode``: this run's, then the supervisor's ``thresholds``, then the
        calibration file's for this S1 version, S2 and mode, then the monitor's default."""
        s1 = self._s1
        if s1 is None:
            return {}
        return resolve_thresholds(monitors, {**self._flags, **flags}, self._cal, self._cal_path, s1.name,
                                  self.s2_name, mode, {m.name: s1.version_for(m.statement) for m in monitors})

    # ---- closing -----------------------------------------------------------------------------------
    def close(self) -> None:
        """Close every S2 session and the S1 this supervisor loaded; runs must have ended."""
        if self._closed:
            return
        self._closed = True
        with ExitStack() as stack:  # every close is attempted, whichever fails
            for backend in self._backends:
                stack.callback(backend.close)
            if self._s1 is not None and self._owns_s1:
                stack.callback(self._s1.close)

    def __enter__(self) -> "Supervisor":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
