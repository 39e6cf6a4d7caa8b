"""``soma bench``: run (method x benchmark) for one S2 model into append-only result files.

Questions go outermost and methods inside, so a run stopped early still has every method on the same
questions. Resuming is the default: ids already in a file are skipped. With ``workers > 1`` each
worker process loads its own S2 (and S1) and the parent alone writes, so lines never interleave.
With ``concurrency > 1`` (an S2 server) that many runs are in flight on threads and the main thread
alone writes, each line whole as it finishes, so a kill loses only the runs still in flight.
"""

from __future__ import annotations

import queue
import time
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence


from soma_local.bench.datasets import Benchmark, get_benchmark, load_items, plan_benchmarks
from soma_local.bench.methods import METHODS, MethodContext, make_method
from soma_local.bench.methods.base import Harness, Method
from soma_local.bench.results import ResultFile, ResultLine, model_label, read_results, result_path
from soma_local.calibration.runs import Question, sample
from soma_local.data_dir import shareable_path
from soma_local.engine.monitors import Monitor
from soma_local.errors import DataError
from soma_local.s1.base import S1
from soma_local.s1.factory import DEFAULT_S1
from soma_local.s2.build import RUNTIMES, S2Options
from soma_local.supervisor.loading import load_run_s1


class HarnessSpec(S2Options):
    """Everything that builds the harness (the S2 options, the S1 and the scan schedule); recorded in
    every result line, so files stay comparable."""

    s2_model: str
    s1: str = DEFAULT_S1
    s1_temperature: float | None = None
    scan_interval: int = 256
    line_break_slack: int = 128
    max_tokens: int = 32768
    adapters: bool = True  # the monitor adapters beside each monitor file, as soma run uses them

    def identity(self) -> dict:
        """The fields that change results (threads, offload, file paths and server URLs do not; the
        runtime does, as runtimes differ in numerics, so a file never mixes llama.cpp and vLLM). An S1
        given by path is recorded by its shareable path: result files are shared, the build machine's
        paths not. Whether adapters are used is recorded per monitor, in the S1 version the runs used."""
        out = self.model_dump(exclude={"threads", "n_gpu_layers", "flash_attn", "s2_model", "chat_template",
                                       "s2", "s2_timeout", "adapters"})
        if self.runtime != "llama_cpp":
            out["s2_runtime"] = self.runtime
        kind, sep, arg = self.s1.partition(":")
        if sep and kind in ("classifier", "readout") and Path(arg).expanduser().is_absolute():
            out["s1"] = f"{kind}:{shareable_path(Path(arg).expanduser())}"
        return out

    def s2_options(self) -> S2Options:
        return S2Options(**self.model_dump(include=set(S2Options.model_fields)))

    def load_s1(self, monitors: Sequence[Monitor] = (), *, batched: bool = False) -> S1 | None:
        """The S1 the SOMA methods run, loaded as ``soma run`` loads it (``supervisor.loading``): wrapped in
        the adapters fitted for it beside ``monitors`` (unless ``adapters`` is off); ``batched``: shared by
        runs in flight."""
        s1, _ = load_run_s1(self.s1, monitors, temperature=self.s1_temperature, threads=self.threads,
                            n_gpu_layers=self.n_gpu_layers, adapters=self.adapters, batched=batched)
        return s1

    def build(self, needs_s1: bool, *, monitors: Sequence[Monitor] = (), s1: S1 | None = None,
              server: int = 0) -> Harness:
        """A harness; ``s1`` shares one S1 between harnesses (else one is loaded with ``monitors``'
        adapters), ``server`` picks one of several S2 URLs."""
        from soma_local.s2.build import build_s2
        from soma_local.engine.pauses import PauseRule

        options = self.s2_options()
        s2 = build_s2(options, server=server)
        if needs_s1 and s1 is None:
            s1 = self.load_s1(monitors)
        return Harness(
            s2=s2,
            sampling=options.sampling,
            s1=s1 if needs_s1 else None,
            pause=PauseRule(self.scan_interval, self.line_break_slack),
            max_tokens=self.max_tokens,
        )


@dataclass(frozen=True)
class Task:
    bench: Benchmark
    item: Question
    method: str


# The methods of a run, each built for the monitor it measures: (monitor name, method name) -> method.
Methods = dict[tuple[str, str], Method]

_worker: dict = {}


def _needs_s1(method_names: Iterable[str]) -> bool:
    return any(METHODS[name].uses_s1 for name in method_names)


def _init(spec: HarnessSpec, methods: Methods, monitors: Sequence[Monitor]) -> None:
    """A worker process's own harness: its own S2, and its own S1 with ``monitors``' adapters."""
    _worker["harness"] = spec.build(_needs_s1(name for _, name in methods), monitors=monitors)
    _worker["methods"] = methods


def _run_task(task: Task, methods: Methods, harness: Harness) -> tuple[Task, float, object]:
    t0 = time.perf_counter()
    method = methods[(task.bench.scenario, task.method)]
    outcome = method.run(task.bench.prompt(task.item), task.bench.monitor, harness)
    return task, time.perf_counter() - t0, outcome


def _solve(task: Task) -> tuple[Task, float, object]:
    return _run_task(task, _worker["methods"], _worker["harness"])


def concurrent_harnesses(spec: HarnessSpec, s1: S1 | None, n: int) -> list[Harness]:
    """``n`` harnesses for runs in flight at once on an HTTP S2: each its own S2 session (harness i
    on server i mod servers, so a question stays on one server's prefix cache) and one shared S1
    (``HarnessSpec.load_s1(batched=True)``) whose scans from all runs go through the model together."""
    return [spec.build(s1 is not None, s1=s1, server=i) for i in range(n)]


def run_concurrently(todo: list[Task], methods: Methods, harnesses: list[Harness]):
    """Yield each finished task's (task, seconds, outcome), keeping ``len(harnesses)`` in flight."""
    free: queue.SimpleQueue[Harness] = queue.SimpleQueue()
    for harness in harnesses:
        free.put(harness)

    def solve(task: Task):
        harness = free.get()
        try:
            return _run_task(task, methods, harness)
        finally:
            free.put(harness)

    pool = ThreadPoolExecutor(len(harnesses), thread_name_prefix="soma-run")
    try:
        for future in as_completed([pool.submit(solve, t) for t in todo]):
            yield future.result()
    finally:
        pool.shutdown(wait=False, cancel_futures=True)


def plan(benchmarks: list[Benchmark], method_names: list[str], limit: int | None, seed: int,
         data_root: Path | None) -> list[Task]:
    """Each benchmark's sampled questions, each with every method reported for its monitor's objective."""
    tasks = []
    for bench in benchmarks:
        items = sample(load_items(bench, data_root), limit, seed)
        runnable = [name for name in method_names if METHODS[name].applies(bench.monitor.objective)]
        tasks += [Task(bench, item, name) for item in items for name in runnable]
    return tasks


def run_bench(
    spec: HarnessSpec,
    method_names: list[str],
    benchmarks: list[str],
    out: Path,
    *,
    monitors: Sequence[Monitor] = (),
    limit: int | None = None,
    sample_seed: int = 0,
    workers: int = 1,
    concurrency: int = 1,
    method_params: dict | None = None,
    data_root: Path | None = None,
    progress: bool = True,
) -> int:
    """Run what is not yet in the result files; return how many lines were written. ``benchmarks``
    are set names or JSONL paths, measured with each of ``monitors`` (none: each set's own monitor;
    no sets: each monitor's own, from its file)."""
    from tqdm import tqdm

    tasks = plan(plan_benchmarks(benchmarks, monitors), method_names, limit, sample_seed, data_root)
    if not tasks:
        raise DataError("nothing to run: no method applies to these benchmarks")
    monitor_of = {t.bench.scenario: t.bench.monitor for t in tasks}
    methods: Methods = {}
    for monitor in monitor_of.values():
        context = MethodContext(out, spec.s2_model, monitor)
        methods.update({(monitor.name, name): make_method(name, method_params or {}, context)
                        for name in method_names if METHODS[name].applies(monitor.objective)})
    if concurrency > 1 and workers > 1:
        raise DataError("--workers and --concurrency exclude each other: processes with their own S2, "
                        "or runs in flight against an S2 server")
    if concurrency > 1 and not RUNTIMES[spec.runtime].concurrent:
        raise DataError("--concurrency needs an S2 server (--s2 vllm:URL); in-process llama.cpp runs one "
                        "sequence at a time (use --workers for several copies)")
    # Loaded here whatever runs the questions: the S1 version each monitor's runs use names its adapter.
    s1 = spec.load_s1(list(monitor_of.values()), batched=concurrency > 1) if _needs_s1(method_names) else None

    # A method that uses S1 also records which version of it (with the monitor's adapter), and one that
    # uses the monitor which monitor: a retrained S1, a new adapter or an edited monitor never resumes a
    # file it did not start.
    def settings_of(scenario: str, name: str, method: Method) -> dict:
        out = {"engine": spec.identity(), "method": method.settings()}
        if METHODS[name].uses_s1:
            out["s1_version"] = s1.version_for(monitor_of[scenario].statement) if s1 is not None else None
        if METHODS[name].uses_monitor:
            out["monitor"] = monitor_of[scenario].run_identity()
        return out

    settings = {key: settings_of(*key, m) for key, m in methods.items()}
    files: dict[tuple[str, str, str], ResultFile] = {}

    def file_of(task: Task) -> ResultFile:
        key = (task.bench.scenario, task.bench.name, task.method)
        if key not in files:
            files[key] = ResultFile(result_path(out, spec.s2_model, task.bench, task.method),
                                    settings[(task.bench.scenario, task.method)])
        return files[key]

    # A method that does not use the monitor (vanilla and the baselines) gives the same run for the same
    # prompt and settings whatever monitor the set is measured with, so a set measured with another monitor
    # takes those runs from its own monitor's files (the paper's layout), or from this run as they finish.
    shared: dict[tuple[str, str], dict[str, ResultLine]] = {}

    def same_run(task: Task) -> tuple[str, str, str] | None:
        if task.bench.home or task.bench.questions.monitor is None or METHODS[task.method].uses_monitor:
            return None
        return task.bench.name, task.method, task.item.id

    def earlier_run(task: Task) -> ResultLine | None:
        key = (task.bench.name, task.method)
        if key not in shared:
            path = result_path(out, spec.s2_model, get_benchmark(task.bench.name), task.method)
            wanted = settings[(task.bench.scenario, task.method)]
            shared[key] = {line.id: line for line in (read_results(path) if path.exists() else [])
                           if line.settings == wanted}
        line = shared[key].get(task.item.id)
        return line if line is not None and line.prompt == task.bench.prompt(task.item) else None

    def same_setup(home: Task, task: Task) -> bool:
        return (home.bench.prompt(home.item) == task.bench.prompt(task.item)
                and settings[(home.bench.scenario, home.method)] == settings[(task.bench.scenario, task.method)])

    def copy_to(task: Task, line: ResultLine) -> None:
        file_of(task).append(line.model_copy(update={"scenario": task.bench.scenario}))

    for task in tasks:
        asked = file_of(task).prompts.get(task.item.id)
        if asked is not None and asked != task.bench.prompt(task.item):
            raise DataError(f"{file_of(task).path}: question {task.item.id} was asked with another prompt (another "
                            f"question file named '{task.bench.name}', or another prompt_suffix); use another --out")
    pending = [t for t in tasks if t.item.id not in file_of(t).prompts]
    done_before = sum(len(f.prompts) for f in files.values())
    running = {(t.bench.name, t.method, t.item.id): t for t in pending if t.bench.home}
    todo: list[Task] = []
    waiting: dict[tuple[str, str, str], list[Task]] = {}
    reused = 0
    for task in pending:
        key = same_run(task)
        line = earlier_run(task) if key else None
        if line is not None:
            copy_to(task, line)
            reused += 1
        elif key in running and same_setup(running[key], task):
            waiting.setdefault(key, []).append(task)
        else:
            todo.append(task)
    if reused and progress:
        print(f"bench: {reused} baseline runs taken from the same questions run with their own monitor")

    def record(task: Task, seconds: float, outcome) -> None:
        line = ResultLine(
            id=task.item.id,
            benchmark=task.bench.name,
            scenario=task.bench.scenario,
            method=task.method,
            model=model_label(spec.s2_model),
            prompt=task.bench.prompt(task.item),
            gold=task.item.answer,
            answerable=task.item.answerable,
            choices=task.bench.choices,
            settings=settings[(task.bench.scenario, task.method)],
            seconds=round(seconds, 3),
            outcome=outcome,
        )
        file_of(task).append(line)
        for twin in waiting.pop((task.bench.name, task.method, task.item.id), []):
            copy_to(twin, line)
            bar.update()

    bar = tqdm(total=len(tasks), initial=len(tasks) - len(todo) - sum(map(len, waiting.values())),
               disable=not progress, unit="run", smoothing=0.1)
    in_process: list[Harness] = []  # closed at the end: a library caller's process keeps running
    try:
        if concurrency > 1:
            in_process = concurrent_harnesses(spec, s1, concurrency)
            for result in run_concurrently(todo, methods, in_process):
                record(*result)
                bar.update()
        elif workers <= 1:
            in_process = [spec.build(s1 is not None, s1=s1)]
            for task in todo:
                bar.set_postfix_str(f"{task.bench.name}/{task.method}")
                record(*_run_task(task, methods, in_process[0]))
                bar.update()
        else:
            init = (spec, methods, list(monitor_of.values()))
            with ProcessPoolExecutor(workers, initializer=_init, initargs=init) as pool:
                for result in pool.map(_solve, todo):
                    record(*result)
                    bar.update()
    finally:
        bar.close()
        for f in files.values():
            f.close()
        for harness in in_process:
            harness.s2.close()
    return sum(len(f.prompts) for f in files.values()) - done_before
