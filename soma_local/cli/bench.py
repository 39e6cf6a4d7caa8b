"""``soma bench run | report | view``: the benchmark commands, registered on the main parser."""

from __future__ import annotations

from pathlib import Path

from soma_local.cli.args import (
    UsageError, add_adapter_argument, add_s2_arguments, add_selection_arguments, existing_file, existing_folder, fraction, nonnegative_float,
    nonnegative_int, positive_float, positive_int, s2_options, selection_from,
)
from soma_local.s1.factory import DEFAULT_S1
from soma_local.s1.model_folders import DEFAULT_S1_MODEL


def cmd_bench_run(args) -> int:
    from soma_local.bench.runner import HarnessSpec, run_bench
    from soma_local.engine.monitors import resolve_monitors

    if not args.benchmark and not args.monitor:
        raise UsageError("soma bench run: name a --benchmark, a --monitor (its file lists its sets), or both")

    spec = HarnessSpec(
        **s2_options(args).model_dump(exclude={"s2_model"}),
        s2_model=args.s2_model or "smollm2-135m",
        s1=args.s1,
        s1_temperature=args.s1_temperature,
        scan_interval=args.scan_interval,
        line_break_slack=args.line_break_slack,
        max_tokens=args.max_tokens,
        adapters=args.adapters,
    )
    params = {
        "budgets": args.budgets,
        "deer_threshold": args.deer_threshold,
        "dynasor_interval": args.dynasor_interval,
        "ses_alpha": args.ses_alpha,
        "ses_rule": args.ses_rule,
    }
    n = run_bench(
        spec,
        args.method,
        args.benchmark or [],
        Path(args.out),
        monitors=resolve_monitors(args.monitor or []),
        limit=args.limit,
        sample_seed=args.sample_seed,
        workers=args.workers,
        concurrency=args.concurrency,
        method_params=params,
    )
    print(f"bench: wrote {n} result lines under {args.out}")
    return 0


def cmd_bench_report(args) -> int:
    from soma_local.bench.report import write_reports
    from soma_local.engine.monitors import resolve_monitors

    for path in write_reports(args.results, Path(args.out or args.results), delta=args.delta,
                              selection=selection_from(args), monitors=resolve_monitors(args.monitor or [])):
        print(path)
    return 0


def cmd_bench_view(args) -> int:
    from soma_local.bench.viewer import write_viewer

    path = write_viewer(args.results, args.id, Path(args.out) if args.out else None, args.h)
    print(path)
    return 0


def register(sub) -> None:
    from soma_local.bench.datasets import SETS
    from soma_local.bench.methods import METHODS

    bench = sub.add_parser("bench", help="benchmarks: run methods, build the paper's tables, view traces")
    bsub = bench.add_subparsers(dest="bench_command", required=True)

    run = bsub.add_parser("run", help="run methods x benchmarks into resumable result files")
    run.add_argument("--method", action="append", required=True, choices=METHODS, help="method to run (repeatable)")
    run.add_argument("--benchmark", action="append", metavar="NAME|FILE.jsonl",
                     help=f"question set to run (repeatable): {', '.join(SETS)}, or a JSONL file (relative to the "
                     "data directory or absolute; needs --monitor). Default: the --monitor's own sets")
    run.add_argument("--monitor", action="append", metavar="NAME|FILE.toml",
                     help="the monitor the sets are measured with (repeatable): its prompt suffix, what SOMA runs, "
                     "its objective's baselines. Default: each shipped set's own (overthinking or unanswerable)")
    run.add_argument("--out", default="benchmarks/results/runs", help="result directory")
    run.add_argument("--limit", type=positive_int, help="questions per benchmark (seeded sample)")
    run.add_argument("--sample-seed", type=int, default=0, help="seed of the --limit question sample")
    run.add_argument("--workers", type=positive_int, default=1, help="processes, each with its own S2 (and S1)")
    run.add_argument("--concurrency", type=positive_int, default=1,
                     help="questions in flight at once against an S2 server (--s2 vllm:URL); their S1 scans "
                     "share forward passes")
    run.add_argument("--s1", default=DEFAULT_S1, help=f"S1 spec for SOMA methods; classifier is "
                     f"classifier:{DEFAULT_S1_MODEL} (default: %(default)s)")
    run.add_argument("--s1-temperature", type=positive_float, help="S1 temperature T in sigmoid(z/T) (default: the S1's own)")
    run.add_argument("--budgets", type=positive_int, nargs="+", help="budget forcing grid (thinking tokens)")
    run.add_argument("--deer-threshold", type=fraction, default=0.95, help="DEER: answer confidence that stops thinking")
    run.add_argument("--dynasor-interval", type=positive_int, default=32, help="base probe interval of the sweep")
    run.add_argument("--ses-alpha", type=fraction, default=0.05, help="SES: significance level of the stopping test")
    run.add_argument("--ses-rule", choices=["parametric", "conformal"], default="parametric",
                     help="SES stopping rule: renewal-process z-test, or maxwise conformal (fits with few keywords)")
    run.add_argument("--scan-interval", type=positive_int, default=256, help="thinking tokens between scans (X)")
    run.add_argument("--line-break-slack", type=nonnegative_int, default=128, help="max tokens to the next line break")
    run.add_argument("--max-tokens", type=positive_int, default=32768, help="generation limit per question")
    add_adapter_argument(run)
    add_s2_arguments(run)
    run.set_defaults(func=cmd_bench_run)

    report = bsub.add_parser("report", help="Tables 2-4 (Markdown, CSV) and the Pareto plot from results")
    report.add_argument("results", type=existing_folder,
                        help="the result directory of one S2 model (RESULTS/<model>) or above")
    report.add_argument("--out", help="where the tables go (default: the result directory)")
    report.add_argument("--monitor", action="append", metavar="FILE.toml",
                        help="the file of a monitor the results were measured with that is not shipped (repeatable)")
    report.add_argument("--delta", type=nonnegative_float, default=0.0, help="calibration tolerance (paper: 0)")
    add_selection_arguments(report)  # how SOMA's h is chosen; the baselines' parameters keep the point rule
    report.set_defaults(func=cmd_bench_report)

    view = bsub.add_parser("view", help="a self-contained HTML trace viewer for one question or one recorded run, "
                           "where scans can be labelled by hand for soma tune")
    view.add_argument("results", type=existing_file, help="a result file (.jsonl) or a run trace (soma run --trace)")
    view.add_argument("id", nargs="?", help="question id (for a result file)")
    view.add_argument("--out", help="HTML path (default: next to the result file)")
    view.add_argument("--h", type=positive_float, help="for a soma/no_reminder readout line: show the takeover at this h "
                      "(the report's calibrated h), read off the recorded branches")
    view.set_defaults(func=cmd_bench_view)
