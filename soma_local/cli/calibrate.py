"""``soma calibrate``: choose h per (S1, S2, monitor) by single-run readout on calibration questions."""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import get_args

from soma_local.cli.args import (
    UsageError, add_adapter_argument, add_calibration_arguments, add_s2_arguments, existing_file, objective_from,
    parse_grid, positive_int, s2_options, selection_from,
)
from soma_local.cli.results import jsonable, progress, write_json
from soma_local.supervisor.loading import use_adapters
from soma_local.data_dir import data_dir, shareable_path
from soma_local.errors import DataError, SomaError


def cmd_calibrate(args) -> int:
    from soma_local.calibration.thresholds import (
        MIN_CALIBRATION_QUESTIONS, CalibrationEntry, calibration_path, choose_threshold, save_entry,
    )
    from soma_local.calibration.runs import grid_results, load_questions, run_readouts, sample
    from soma_local.engine.monitors import resolve_monitors
    from soma_local.calibration.readout import ReadoutRun
    from soma_local.calibration.report import TABLE_KEY, effects_table, h_label, pareto_plot, table
    from soma_local.s1.batched import BatchedS1
    from soma_local.s1.factory import load_s1
    from soma_local.s2.build import RUNTIMES, build_s2
    from soma_local.engine.pauses import PauseRule
    from soma_local.engine.supervise import RunConfig
    from soma_local.engine.trace import read_trace

    (monitor,) = resolve_monitors([args.monitor])
    files = args.data or [data_dir() / name for name in monitor.calibration_data]
    if not files:
        raise UsageError(f"monitor '{monitor.name}' names no calibration_data in its file: pass --data FILE")
    for f in files:
        if not Path(f).is_file():
            raise DataError(f"{f}: calibration set not found (pass --data FILE or set SOMA_DATA_DIR)")
    questions = [q for f in files for q in sample(load_questions(f), args.limit, args.seed)]
    objective = objective_from(args, monitor)
    grid = parse_grid(args.grid)
    options = s2_options(args)
    sampling = options.sampling
    if args.concurrency > 1 and not RUNTIMES[options.runtime].concurrent:
        raise SomaError("--concurrency needs an S2 server (--s2 vllm:URL)")
    backends = [build_s2(options, server=i) for i in range(max(1, args.concurrency))]
    s2 = backends[0]
    s1 = load_s1(args.s1, temperature=args.s1_temperature, n_threads=args.threads, n_gpu_layers=args.n_gpu_layers)
    if s1 is None:
        raise SomaError("calibration needs an S1 (--s1 none given)")
    if len(backends) > 1:
        s1 = BatchedS1(s1)
    s1, _ = use_adapters(s1, [monitor], args.adapters)
    config = RunConfig(
        reminders=args.mode == "soma",
        takeovers="branch",
        pause=PauseRule(args.scan_interval, args.line_break_slack),
        max_tokens=args.max_tokens,
        sampling=sampling,
    )
    out = Path(args.out)
    with progress(len(questions), f"readout {monitor.name}") as bar:
        paths = run_readouts(questions, backends, s1, [monitor], config, out / "traces",
                             prompt_of=lambda q: monitor.prompt(q.question), on_done=lambda q: bar.update())
    runs = [(q, ReadoutRun(read_trace(p), str(p))) for q, p in zip(questions, paths)]
    results = grid_results(runs, monitor.name, grid)
    choice = choose_threshold(results, objective, selection_from(args))
    metrics = {c.threshold: c.metrics for c in choice.candidates}
    results_path = out / "calibration_results.json"
    write_json(results_path, {
        "s1": s1.name, "s1_version": s1.version_for(monitor.statement), "s2": s2.name, "monitor": monitor.name,
        "mode": args.mode,
        "datasets": [shareable_path(f) for f in files], "limit": args.limit, "seed": args.seed,
        "scan_interval": args.scan_interval, "max_tokens": args.max_tokens,
        "choice": jsonable(choice),
        "items": {h_label(h): [jsonable(i) for i in items] for h, items in results.items()},
    })
    series = f"{s2.name} / {monitor.name}"
    plot = pareto_plot({series: metrics}, {}, objective.kind, out / "pareto.png",
                       f"readout calibration: {monitor.name}, {args.mode}", chosen={series: choice.threshold})
    print(table([(f"h={h_label(h)}" + (" *" if h == choice.threshold else ""), m) for h, m in metrics.items()],
                baseline=metrics[math.inf]))
    print(TABLE_KEY)
    print(effects_table(choice))
    print(f"h={h_label(choice.threshold)} on {len(questions)} calibration questions: {choice.evidence()}")
    if refused := choice.refused():
        print(refused)
    entry = CalibrationEntry.from_choice(
        choice, s1=s1.name, s2=s2.name, monitor=monitor.name, mode=args.mode,
        s1_version=s1.version_for(monitor.statement),
        scan_interval=args.scan_interval, datasets=[Path(f).name for f in files], n_questions=len(questions),
        results=str(results_path),
    )
    cal_path = calibration_path(args.calibration)
    key = f"({s1.name}, {s2.name}, {monitor.name}, {args.mode}) [{objective.describe()}; {choice.selection.describe()}]"
    if len(questions) < MIN_CALIBRATION_QUESTIONS and not args.save_anyway:
        print(f"h = {h_label(choice.threshold)} for {key}; NOT written to {cal_path}: {len(questions)} question(s) "
              f"is too few to set h for later runs (>= {MIN_CALIBRATION_QUESTIONS}, or --save-anyway); "
              f"results {results_path}, plot {plot}")
    else:
        save_entry(cal_path, entry)
        print(f"h = {h_label(choice.threshold)} for {key} -> {cal_path}; results {results_path}, plot {plot}")
    s2.close()
    s1.close()
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    from soma_local.calibration.thresholds import CalibratedMode

    cal = sub.add_parser("calibrate", help="choose h per (S1, S2, monitor) by single-run readout")
    add_calibration_arguments(cal)
    add_adapter_argument(cal)
    cal.add_argument("--data", action="append", type=existing_file,
                     help="calibration JSONL (default: the monitor file's calibration_data, under the data directory)")
    cal.add_argument("--mode", "--variant", dest="mode", default="soma", choices=list(get_args(CalibratedMode)),
                     help="the run mode h is for: soma (remind, then take over) or no_reminder (the ablation), each "
                     "with its own h (--variant: its old name)")
    cal.add_argument("--max-tokens", type=positive_int, default=32768, help="generation limit per question")
    cal.add_argument("--concurrency", type=positive_int, default=1,
                     help="questions in flight at once against an S2 server (--s2 vllm:URL)")
    add_s2_arguments(cal, skip=("--seed", "--threads"))  # both already calibration arguments
    cal.add_argument("--out", default="runs/calibrate", help="output folder (traces, results, pareto.png)")
    cal.add_argument("--save-anyway", action="store_true",
                     help="write h to the calibration file even from fewer than 20 questions")
    cal.set_defaults(func=cmd_calibrate)
