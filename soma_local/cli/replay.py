"""``soma replay``: S1 and the controller over recorded S2 traces, with no S2 compute."""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

from soma_local.cli.args import (
    add_adapter_argument, add_calibration_arguments, existing_file, fraction, nonnegative_int, objective_from,
    parse_grid, positive_float, selection_from,
)
from soma_local.cli.results import jsonable, progress, write_json
from soma_local.supervisor.loading import use_adapters
from soma_local.data_dir import data_dir, shareable_path
from soma_local.errors import SomaError


def cmd_replay(args) -> int:
    from soma_local.calibration.thresholds import ThresholdSource, choose_threshold, open_calibration, resolve_thresholds
    from soma_local.calibration.metrics import summarize
    from soma_local.s2.model_files import GgufVocab, resolve_gguf
    from soma_local.engine.monitors import resolve_monitors
    from soma_local.calibration.runs import load_questions
    from soma_local.calibration.recorded import (
        InterruptedRun, from_engine_trace, load_traces, reserved_questions, trace_files,
    )
    from soma_local.calibration.replay import (
        MODE, calibration_ids, group_key, grouped, replay_item, sample_traces, scan,
    )
    from soma_local.engine.trace import read_trace
    from soma_local.calibration.report import (
        PAPER_UNANSWERABLE, PAPER_UNANSWERABLE_STATEMENT, TABLE_KEY, effects_table, h_label, replay_plot, table,
    )
    from soma_local.s1.cache import CachedS1, ScoreCache
    from soma_local.s1.factory import load_s1
    from soma_local.engine.pauses import PauseRule
    from soma_local.calibration.scoring import is_abstention

    (monitor,) = resolve_monitors([args.monitor])
    cal, cal_path = open_calibration(args.calibration)
    # The gold guard is read before any scoring: a missing list stops the run now, not after hours of S1.
    reserved = reserved_questions(data_dir()) if args.calibrate_share else frozenset()
    flags = {monitor.name: args.threshold} if args.threshold is not None else {}
    files = args.traces or ([] if args.engine_traces else trace_files(data_dir()))
    traces = [t for f in files for t in sample_traces(load_traces(f), args.limit, args.seed)]
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
    vocab = GgufVocab.from_path(resolve_gguf(args.tokenizer))
    s1 = CachedS1(s1, ScoreCache(args.cache_dir, s1.identity))  # the S1's own p: adapters apply over the cache
    s1, _ = use_adapters(s1, [monitor], args.adapters)
    rule = PauseRule(args.scan_interval, args.line_break_slack)
    scanned = []
    with progress(len(traces), f"replay {monitor.name} with {s1.name}") as bar:
        for t in traces:
            scanned.append(scan(t, monitor, s1, vocab, rule))
            bar.update()
    s1.close()

    grid = parse_grid(args.grid)
    abstaining = is_abstention(monitor.takeover.prefill)

    def outcomes_at(items, h: float):
        return [replay_item(t, h, abstaining, args.takeover_answer_tokens) for t in items]

    def metrics_at(items, h: float):
        return summarize(outcomes_at(items, h))

    # With --calibrate-share, h is chosen per S2 on a seeded share of the questions and reported on the rest.
    held = (calibration_ids({t.id for t in scanned}, args.calibrate_share, args.seed, reserved)
            if args.calibrate_share else set())
    objective, selection = objective_from(args, monitor), selection_from(args)
    choices, calibration = {}, {}
    for model in sorted({group_key(t)[1] for t in scanned if t.id in held}):
        items = [t for t in scanned if t.id in held and group_key(t)[1] == model]
        choice = choices[model] = choose_threshold({x: outcomes_at(items, x) for x in grid}, objective, selection)
        calibration[model] = {"n": len(items), "evidence": choice.evidence(), "choice": jsonable(choice)}
        print(f"\n== calibration on {len(items)} traces of {model} [{objective.describe()}; {selection.describe()}]: "
              f"h={h_label(choice.threshold)}\n   {choice.evidence()}")
        if refused := choice.refused():
            print(f"   {refused}")
        if args.show_grid:
            per_h = {c.threshold: c.metrics for c in choice.candidates}
            print(table([(f"h={h_label(x)}", m) for x, m in per_h.items()], baseline=per_h[math.inf]))
            print(effects_table(choice))
    out = Path(args.out)
    groups = {}
    for (dataset, model), items in sorted(grouped(t for t in scanned if t.id not in held).items()):
        chosen = ({monitor.name: ThresholdSource(h=choices[model].threshold,
                                                 source=f"calibrated on {calibration[model]['n']} other traces")}
                  if model in choices else {})
        picked = resolve_thresholds([monitor], flags, cal, cal_path, s1.name, model, MODE,
                                    s1.version_for(monitor.statement), chosen)[monitor.name]
        if picked.warning:
            print(f"soma: warning: {picked.warning}", file=sys.stderr)
        h, source = picked.h, picked.source
        hs = sorted(set(grid) | {h})
        per_h = {x: metrics_at(items, x) for x in hs}
        vanilla = summarize([t.vanilla for t in items])
        label = f"{dataset} / {model}"
        groups[label] = {"h": h_label(h), "h_source": source, "vanilla": jsonable(vanilla),
                         "grid": {h_label(x): jsonable(m) for x, m in per_h.items()}}
        print(f"\n== {label}: {len(items)} traces, S1 {s1.name}, no-reminder controller, h={h_label(h)} ({source})")
        print(table([("vanilla", vanilla), (f"SOMA h={h_label(h)}", per_h[h])], baseline=vanilla))
        if args.show_grid:
            print(table([(f"h={h_label(x)}", m) for x, m in per_h.items()], baseline=vanilla))
        paper = PAPER_UNANSWERABLE.get((dataset, model)) if monitor.statement == PAPER_UNANSWERABLE_STATEMENT else None
        if paper:
            print(f"paper (Table 3, Jev S1, sampled, 32k limit): {paper}")
    payload = {
        "s1": s1.name, "s1_version": s1.version_for(monitor.statement), "monitor": monitor.name,
        "objective": objective.kind,
        "controller": MODE,
        "tokenizer": str(resolve_gguf(args.tokenizer).name), "scan_interval": args.scan_interval,
        "takeover_answer_tokens": args.takeover_answer_tokens, "limit": args.limit, "seed": args.seed,
        "files": [shareable_path(f) for f in files], "calibrate_share": args.calibrate_share, "calibration": calibration,
        "calibration_ids": sorted(held), "groups": groups, "traces": [jsonable(t) for t in scanned],
    }
    write_json(out / "replay_results.json", payload)
    plot = replay_plot(payload, out / "pareto.png")
    print(f"\n{TABLE_KEY}\nresults {out / 'replay_results.json'}, plot {plot}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    rep = sub.add_parser("replay", help="S1 + controller over recorded S2 traces (no S2 compute)")
    add_calibration_arguments(rep)
    add_adapter_argument(rep)
    rep.add_argument("--traces", action="append", type=existing_file,
                     help="trace JSONL (default: every <data>/traces/*.jsonl)")
    rep.add_argument("--engine-traces", action="append", type=existing_file,
                     help="a trace of our own `soma run` (repeatable)")
    rep.add_argument("--questions", action="append", type=existing_file,
                     help="dataset JSONL giving gold and answerability for --engine-traces")
    rep.add_argument("--threshold", type=positive_float, help="h to report (default: calibration file, else monitor's)")
    rep.add_argument("--tokenizer", help="GGUF whose tokenizer counts tokens (default: smollm2-135m)")
    rep.add_argument("--cache-dir", default="runs/s1_cache", help="S1 score cache folder")
    rep.add_argument("--takeover-answer-tokens", type=nonnegative_int, default=0,
                     help="tokens charged for a takeover's answer, which replay does not generate")
    rep.add_argument("--show-grid", action="store_true", help="print every h of the grid")
    rep.add_argument("--calibrate-share", type=fraction, default=0.0,
                     help="choose h per S2 on this seeded share of the questions and report on the rest (e.g. 0.5)")
    rep.add_argument("--include-trained", action="store_true",
                     help="keep traces whose questions the S1 was trained on (left out by default)")
    rep.add_argument("--out", default="runs/replay", help="output folder (results, pareto.png)")
    rep.set_defaults(func=cmd_replay)
