"""``soma calibrate`` and ``soma replay``: threshold calibration by single-run readout, and S1 plus
controller over recorded traces. Kept out of ``cli.py`` so that file stays a thin dispatcher."""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from soma_local.calibrate import H_GRID
from soma_local.data_dir import data_dir, shareable_path
from soma_local.errors import DataError, SomaError
from soma_local.s2.build import add_s2_arguments

DEFAULT_GRID = ",".join(f"{h:g}" for h in H_GRID)


def _grid(text: str) -> list[float]:
    try:
        values = sorted({float(x) for x in text.split(",") if x.strip()} | {math.inf})
    except ValueError:
        raise SomaError(f"--grid takes comma-separated thresholds, got '{text}'") from None
    if any(not h > 0 for h in values):
        raise SomaError("--grid thresholds must be > 0")
    return values


def _progress(total: int, desc: str):
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit="q", dynamic_ncols=True)


def _write_json(path: Path, payload: dict) -> None:
    import json

    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=1, allow_nan=False) + "\n", encoding="utf-8")


def _objective(args, monitor: str):
    from soma_local.calibrate import Objective, default_objective

    if args.objective:
        return Objective(kind=args.objective, delta=args.delta, fa_weight=args.fa_weight)
    return default_objective(monitor, args.delta, args.fa_weight)


def _jsonable(obj):
    """Through pydantic's JSON encoder, which writes h = inf as "Infinity" (plain json cannot)."""
    import json

    return json.loads(obj.model_dump_json())


# ---- soma calibrate ----------------------------------------------------------------------------

def cmd_calibrate(args) -> int:
    from soma_local.calibrate import (
        MIN_CALIBRATION_QUESTIONS, CalibrationEntry, calibration_path, choose_threshold, save_entry,
    )
    from soma_local.bench.datasets import scenario_prompt
    from soma_local.calibration_runs import grid_results, load_questions, run_readouts
    from soma_local.metrics import summarize
    from soma_local.monitors import resolve_monitors
    from soma_local.readout import ReadoutRun
    from soma_local.replay import sample
    from soma_local.report import TABLE_KEY, h_label, pareto_plot, table
    from soma_local.s1.batched import BatchedS1
    from soma_local.s1.factory import load_s1
    from soma_local.s2.build import build_s2, s2_options
    from soma_local.s2.session import PauseRule
    from soma_local.supervise import RunConfig
    from soma_local.trace import read_trace

    (monitor,) = resolve_monitors([args.monitor])
    files = args.data or [
        data_dir() / monitor.name / name for name in ("calib_easy.jsonl", "calib_hard.jsonl")
    ]
    for f in files:
        if not Path(f).is_file():
            raise DataError(f"{f}: calibration set not found (pass --data FILE or set SOMA_DATA_DIR)")
    questions = [q for f in files for q in sample(load_questions(f), args.limit, args.seed)]
    objective = _objective(args, monitor.name)
    grid = _grid(args.grid)
    options = s2_options(args)
    sampling = options.sampling
    if args.concurrency > 1 and options.runtime == "llama_cpp":
        raise SomaError("--concurrency needs an S2 server (--s2 vllm:URL)")
    backends = [build_s2(options, server=i) for i in range(max(1, args.concurrency))]
    s2 = backends[0]
    s1 = load_s1(args.s1, temperature=args.s1_temperature, n_threads=args.threads, n_gpu_layers=args.n_gpu_layers)
    if s1 is None:
        raise SomaError("calibration needs an S1 (--s1 none given)")
    if len(backends) > 1:
        s1 = BatchedS1(s1)
    config = RunConfig(
        mode="readout" if args.variant == "soma" else "readout_no_reminder",
        pause=PauseRule(args.scan_interval, args.line_break_slack),
        max_tokens=args.max_tokens,
        sampling=sampling,
    )
    out = Path(args.out)
    with _progress(len(questions), f"readout {monitor.name}") as bar:
        paths = run_readouts(questions, backends, s1, [monitor], config, out / "traces",
                             prompt_of=lambda q: scenario_prompt(monitor.name, q.question), on_done=lambda q: bar.update())
    runs = [(q, ReadoutRun(read_trace(p), str(p))) for q, p in zip(questions, paths)]
    results = grid_results(runs, monitor.name, grid)
    metrics = {h: summarize(items) for h, items in results.items()}
    choice = choose_threshold(metrics, objective)
    results_path = out / "calibration_results.json"
    _write_json(results_path, {
        "s1": s1.name, "s1_version": s1.version, "s2": s2.name, "monitor": monitor.name, "variant": args.variant,
        "datasets": [shareable_path(f) for f in files], "limit": args.limit, "seed": args.seed,
        "scan_interval": args.scan_interval, "max_tokens": args.max_tokens,
        "choice": _jsonable(choice),
        "items": {h_label(h): [_jsonable(i) for i in items] for h, items in results.items()},
    })
    series = f"{s2.name} / {monitor.name}"
    plot = pareto_plot({series: metrics}, {}, monitor.name, out / "pareto.png",
                       f"readout calibration: {monitor.name}, {args.variant}", chosen={series: choice.threshold})
    print(table([(f"h={h_label(h)}" + (" *" if h == choice.threshold else ""), m) for h, m in metrics.items()],
                baseline=metrics[math.inf]))
    print(TABLE_KEY)
    if refused := choice.refused():
        print(refused)
    entry = CalibrationEntry(
        s1=s1.name, s2=s2.name, monitor=monitor.name, variant=args.variant, s1_version=s1.version,
        threshold=choice.threshold, objective=objective, scan_interval=args.scan_interval,
        datasets=[Path(f).name for f in files], n_questions=len(questions), results=str(results_path),
    )
    cal_path = calibration_path(args.calibration)
    key = f"({s1.name}, {s2.name}, {monitor.name}, {args.variant}) [{objective.describe()}]"
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


# ---- soma replay -------------------------------------------------------------------------------

def cmd_replay(args) -> int:
    from soma_local.calibrate import calibrated_thresholds, calibration_path, choose_threshold, load_calibration
    from soma_local.metrics import summarize
    from soma_local.models import resolve_gguf
    from soma_local.monitors import resolve_monitors
    from soma_local.calibration_runs import load_questions
    from soma_local.replay import (
        CachedS1, InterruptedRun, ScoreCache, calibration_ids, from_engine_trace, gguf_pieces, group_key, grouped,
        load_traces, replay_item, reserved_questions, sample, scan,
    )
    from soma_local.trace import read_trace
    from soma_local.report import PAPER_UNANSWERABLE, TABLE_KEY, h_label, replay_plot, table
    from soma_local.s1.factory import load_s1
    from soma_local.s2.session import PauseRule
    from soma_local.scoring import is_abstention

    (monitor,) = resolve_monitors([args.monitor])
    if not 0 <= args.calibrate_share < 1:
        raise SomaError(f"--calibrate-share must be in [0, 1), got {args.calibrate_share}")
    files = args.traces or ([] if args.engine_traces else sorted((data_dir() / "traces").glob("*.jsonl")))
    if not files and not args.engine_traces:
        raise DataError(f"no trace files under {data_dir() / 'traces'} (pass --traces FILE or set SOMA_DATA_DIR)")
    traces = [t for f in files for t in sample(load_traces(f), args.limit, args.seed)]
    if args.engine_traces:
        questions = {q.question.strip(): q for f in args.questions or [] for q in load_questions(f)}
        for f in args.engine_traces:
            try:
                traces.append(from_engine_trace(read_trace(f), questions, str(f)))
            except InterruptedRun as exc:
                print(f"skipped {exc}")
    s1 = load_s1(args.s1, temperature=args.s1_temperature, n_threads=args.threads)
    if s1 is None:
        raise SomaError("replay needs an S1 (--s1 none given)")
    if s1.trained_questions and not args.include_trained:
        before = len(traces)
        traces = [t for t in traces if t.question_id not in s1.trained_questions]
        print(f"left out {before - len(traces)} of {before} traces: their questions are in {s1.name}'s training "
              "split (--include-trained keeps them)")
    pieces_of = gguf_pieces(resolve_gguf(args.tokenizer))
    s1 = CachedS1(s1, ScoreCache(args.cache_dir, s1.identity))
    rule = PauseRule(args.scan_interval, args.line_break_slack)
    scanned = []
    with _progress(len(traces), f"replay {monitor.name} with {s1.name}") as bar:
        for t in traces:
            scanned.append(scan(t, monitor, s1, pieces_of, rule))
            bar.update()
    s1.close()

    grid = _grid(args.grid)
    abstaining = is_abstention(monitor.takeover.prefill)

    def metrics_at(items, h: float):
        return summarize([replay_item(t, h, abstaining, args.takeover_answer_tokens) for t in items])

    # With --calibrate-share, h is chosen per S2 on a seeded share of the questions and reported on the rest.
    held = (calibration_ids({t.id for t in scanned}, args.calibrate_share, args.seed, reserved_questions(data_dir()))
            if args.calibrate_share else set())
    objective = _objective(args, monitor.name)
    choices, calibration = {}, {}
    for model in sorted({group_key(t)[1] for t in scanned if t.id in held}):
        items = [t for t in scanned if t.id in held and group_key(t)[1] == model]
        per_h = {x: metrics_at(items, x) for x in grid}
        choices[model] = choose_threshold(per_h, objective)
        calibration[model] = {"n": len(items), "choice": _jsonable(choices[model])}
        print(f"\n== calibration on {len(items)} traces of {model} [{objective.describe()}]: "
              f"h={h_label(choices[model].threshold)}")
        if refused := choices[model].refused():
            print(f"   {refused}")
        if args.show_grid:
            print(table([(f"h={h_label(x)}", m) for x, m in per_h.items()], baseline=per_h[math.inf]))
    cal = load_calibration(calibration_path(args.calibration))
    out = Path(args.out)
    groups = {}
    for (dataset, model), items in sorted(grouped(t for t in scanned if t.id not in held).items()):
        from_file = calibrated_thresholds(cal, s1.name, model, [monitor.name], "no_reminder", s1.version).get(monitor.name)
        h, source = (
            (args.threshold, "--threshold") if args.threshold
            else (choices[model].threshold, f"calibrated on {calibration[model]['n']} other traces") if model in choices
            else (from_file, "calibration file") if from_file
            else (monitor.default_threshold, "monitor default")
        )
        hs = sorted(set(grid) | {h})
        per_h = {x: metrics_at(items, x) for x in hs}
        vanilla = summarize([t.vanilla for t in items])
        label = f"{dataset} / {model}"
        groups[label] = {"h": h_label(h), "h_source": source, "vanilla": _jsonable(vanilla),
                         "grid": {h_label(x): _jsonable(m) for x, m in per_h.items()}}
        print(f"\n== {label}: {len(items)} traces, S1 {s1.name}, no-reminder controller, h={h_label(h)} ({source})")
        print(table([("vanilla", vanilla), (f"SOMA h={h_label(h)}", per_h[h])], baseline=vanilla))
        if args.show_grid:
            print(table([(f"h={h_label(x)}", m) for x, m in per_h.items()], baseline=vanilla))
        paper = PAPER_UNANSWERABLE.get((dataset, model)) if monitor.name == "unanswerable" else None
        if paper:
            print(f"paper (Table 3, Jev S1, sampled, 32k limit): {paper}")
    payload = {
        "s1": s1.name, "s1_version": s1.version, "monitor": monitor.name, "controller": "no_reminder",
        "tokenizer": str(resolve_gguf(args.tokenizer).name), "scan_interval": args.scan_interval,
        "takeover_answer_tokens": args.takeover_answer_tokens, "limit": args.limit, "seed": args.seed,
        "files": [shareable_path(f) for f in files], "calibrate_share": args.calibrate_share, "calibration": calibration,
        "calibration_ids": sorted(held), "groups": groups, "traces": [_jsonable(t) for t in scanned],
    }
    _write_json(out / "replay_results.json", payload)
    plot = replay_plot(payload, out / "pareto.png")
    print(f"\n{TABLE_KEY}\nresults {out / 'replay_results.json'}, plot {plot}")
    return 0


# ---- registration ------------------------------------------------------------------------------

def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--monitor", default="unanswerable", help="monitor name or .toml path")
    p.add_argument("--s1", help="S1 spec (default: the shipped classifier; see soma run --help)")
    p.add_argument("--s1-temperature", type=float, help="S1 temperature T in sigmoid(z/T)")
    p.add_argument("--grid", default=DEFAULT_GRID, help="thresholds h to evaluate (inf is always added)")
    p.add_argument("--limit", type=int, help="questions per file, seeded sample (default: all)")
    p.add_argument("--seed", type=int, default=0, help="seed of the question sample and of S2 sampling")
    p.add_argument("--scan-interval", type=int, default=256, help="thinking tokens between scans (X)")
    p.add_argument("--line-break-slack", type=int, default=128, help="max tokens to the next line break")
    p.add_argument("--threads", type=int, help="CPU threads (default: half the usable cores, at least 1)")
    p.add_argument("--calibration", help="calibration file (default: $SOMA_CALIBRATION or calibration/thresholds.json)")
    p.add_argument("--objective", choices=["fewest_tokens", "abstention"], help="how h is chosen (default: by monitor)")
    p.add_argument("--delta", type=float, default=0.0, help="accuracy tolerance against h=inf (fraction)")
    p.add_argument("--fa-weight", type=float, default=1.0, help="abstention objective: Abs - w*FA")


def register(sub) -> None:
    cal = sub.add_parser("calibrate", help="choose h per (S1, S2, monitor) by single-run readout")
    _common(cal)
    cal.add_argument("--data", action="append", help="calibration JSONL (default: <data>/<monitor>/calib_{easy,hard})")
    cal.add_argument("--variant", default="soma", choices=["soma", "no_reminder"],
                     help="soma (remind, then take over) or the no-reminder ablation, each with its own h")
    cal.add_argument("--max-tokens", type=int, default=32768, help="generation limit per question")
    cal.add_argument("--concurrency", type=int, default=1,
                     help="questions in flight at once against an S2 server (--s2 vllm:URL)")
    add_s2_arguments(cal, skip=("--seed", "--threads"))  # both already in _common
    cal.add_argument("--out", default="runs/calibrate", help="output folder (traces, results, pareto.png)")
    cal.add_argument("--save-anyway", action="store_true",
                     help="write h to the calibration file even from fewer than 20 questions")
    cal.set_defaults(func=cmd_calibrate)

    rep = sub.add_parser("replay", help="S1 + controller over recorded S2 traces (no S2 compute)")
    _common(rep)
    rep.add_argument("--traces", action="append", help="trace JSONL (default: every <data>/traces/*.jsonl)")
    rep.add_argument("--engine-traces", action="append", help="a trace of our own `soma run` (repeatable)")
    rep.add_argument("--questions", action="append", help="dataset JSONL giving gold and answerability for --engine-traces")
    rep.add_argument("--threshold", type=float, help="h to report (default: calibration file, else monitor's)")
    rep.add_argument("--tokenizer", help="GGUF whose tokenizer counts tokens (default: smollm2-135m)")
    rep.add_argument("--cache-dir", default="runs/s1_cache", help="S1 score cache folder")
    rep.add_argument("--takeover-answer-tokens", type=int, default=0,
                     help="tokens charged for a takeover's answer, which replay does not generate")
    rep.add_argument("--show-grid", action="store_true", help="print every h of the grid")
    rep.add_argument("--calibrate-share", type=float, default=0.0,
                     help="choose h per S2 on this seeded share of the questions and report on the rest (e.g. 0.5)")
    rep.add_argument("--include-trained", action="store_true",
                     help="keep traces whose questions the S1 was trained on (left out by default)")
    rep.add_argument("--out", default="runs/replay", help="output folder (results, pareto.png)")
    rep.set_defaults(func=cmd_replay)
