"""``soma tune``: fit a monitor adapter on labels of its statement, show what it does on held-out labels,
and keep it beside the monitor only when it helps."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from soma_local.cli.args import existing_file, held_share, positive_int
from soma_local.errors import SomaError
from soma_local.s1.factory import DEFAULT_S1_HELP


def _table(result) -> str:
    rows = [("S1 alone", result.without), ("S1 + adapter", result.with_adapter)]
    lines = [f"{'held-out labels':<16} {'AUROC':>7} {'ECE':>7} {'log loss':>9}"]
    lines += [f"{name:<16} {f.auroc:>7.3f} {f.ece:>7.3f} {f.log_loss:>9.3f}" for name, f in rows]
    return "\n".join(lines)


def cmd_tune(args) -> int:
    import numpy as np

    from soma_local.calibration.labels import read_labels
    from soma_local.calibration.tune import check_labels
    from soma_local.engine.monitors import resolve_monitors
    from soma_local.s1.adapter import adapter_file_path, read_adapter_file
    from soma_local.s1.cache import CachedS1, ScoreCache
    from soma_local.s1.factory import load_s1

    (monitor,) = resolve_monitors([args.monitor])
    out = args.out or adapter_file_path(monitor.file)
    read_adapter_file(out)  # a corrupt file is named before any work, and never overwritten blind
    labels = read_labels(args.labels, monitor)
    y = np.array([lab.p for lab in labels])
    check_labels(y)  # before the S1 loads
    s1 = load_s1(args.s1, n_threads=args.threads)
    if s1 is None:
        raise SomaError("an adapter sharpens an S1: --s1 none has nothing to tune")
    try:
        return _fit_and_save(args, monitor, labels, y, out, s1 if not args.cache_dir else
                             CachedS1(s1, ScoreCache(args.cache_dir, s1.identity)))
    finally:
        s1.close()


def _fit_and_save(args, monitor, labels, y, out, s1) -> int:
    from soma_local.calibration.tune import CONFIDENCE, MIN_GROUPS, tune
    from soma_local.s1.adapter import (DEFAULT_FEATURES, FEATURE_CHOICES, Adapter, AdapterReport, adapter_inputs,
                                       feature_columns, save_adapter)

    print(f"soma tune {monitor.name}: {len(labels)} labels from {len(args.labels)} file(s); S1 {s1.identity}",
          file=sys.stderr)
    progress = lambda n: print(f"\r  scored {n}/{len(labels)}", end="", file=sys.stderr, flush=True)
    x = adapter_inputs(s1, monitor.statement, [(lab.task, lab.reasoning) for lab in labels], on_progress=progress)
    print(file=sys.stderr)
    choices = {tuple(feature_columns(DEFAULT_FEATURES, sets)): sets for sets in FEATURE_CHOICES}
    result = tune(x, y, [lab.group for lab in labels], args.held_out, args.seed, list(choices))
    chosen = choices[result.fitted.columns[1:]]
    how = "whole questions" if result.questions >= MIN_GROUPS else (
        f"labels of only {result.questions} question(s), split one by one: states of one run on both sides make "
        "these figures optimistic")
    print(f"fitted on {result.n_fit} labels, held out {result.n_held} ({how}); chosen by cross-validation: "
          f"features {', '.join(chosen) or 'none (the S1 recalibrated)'}, C = {result.fitted.c:g}")
    print(_table(result))
    print(f"log-loss gain over the S1 alone: {result.without.log_loss - result.with_adapter.log_loss:+.3f}, "
          f"{100 * CONFIDENCE:g} % lower bound {result.gain_low:+.3f} (paired bootstrap over held-out questions)")
    if not result.better:
        print(f"not saved: on the held-out labels the adapter is no better than none beyond their noise (it must "
              f"keep AUROC and lower the log loss with the bound above 0). {out} is unchanged", file=sys.stderr)
        return 1
    adapter = Adapter(
        monitor=monitor.name, statement=monitor.statement, s1=s1.identity, features=list(chosen),
        mean=result.fitted.mean.tolist(), scale=result.fitted.scale.tolist(), weights=result.fitted.weights.tolist(),
        bias=result.fitted.bias,
        report=AdapterReport(labels=[str(p) for p in args.labels], n_fit=result.n_fit, n_held=result.n_held,
                             without=result.without, with_adapter=result.with_adapter, c=result.fitted.c,
                             gain_low=round(result.gain_low, 4)),
    )
    save_adapter(out, adapter)
    print(f"saved {out} (for {s1.identity}; runs of '{monitor.name}' with this S1 use it)")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    tune = sub.add_parser("tune", help="fit a monitor adapter on labels of its statement", description=(
        "Fit a small head (the S1's logit plus text statistics of the whole state) on labels of one monitor's "
        "statement, report AUROC and ECE on held-out labels with and without it, and save it beside the "
        "monitor file when it helps. Labels: JSONL lines with p and the state (a reader's, the trace "
        "viewer's export) or recorded traces (each scan's p from the S1 that run used)."))
    tune.add_argument("monitor", help="monitor name or .toml path")
    tune.add_argument("--labels", type=existing_file, nargs="+", required=True, metavar="FILE",
                      help="label JSONL files or recorded run traces")
    tune.add_argument("--s1", help="the S1 to sharpen: classifier[:NAME|FOLDER], readout[:GGUF] or jev[...] "
                      f"(default: {DEFAULT_S1_HELP})")
    tune.add_argument("--held-out", type=held_share, default=0.3, help="share of labels held out, by question "
                      "(0.1 to 0.5)")
    tune.add_argument("--seed", type=int, default=0, help="seed of the held-out split")
    tune.add_argument("--out", type=Path, help="adapter file (default: <monitor>.adapters.json beside the monitor)")
    tune.add_argument("--cache-dir", type=Path, help="keep the S1's scores here, so a second fit costs no S1 call")
    tune.add_argument("--threads", type=positive_int, help="CPU threads for the S1")
    tune.set_defaults(func=cmd_tune)
