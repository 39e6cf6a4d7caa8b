"""``soma run``: supervise S2 on one question, streaming its thinking, each scan, reminders, a takeover
and the answer."""

from __future__ import annotations

import argparse
import sys
from datetime import datetime
from pathlib import Path

from soma_local.cli.args import (
    add_adapter_argument, add_s2_arguments, check_fits_context, existing_file, nonnegative_int, parse_thresholds,
    positive_float, positive_int, read_question, s2_options, writable_file,
)
from soma_local.engine.supervise import MODES
from soma_local.supervisor import DEFAULT_MONITORS


def _prepare(args):
    """What is left to check once argparse has checked each argument alone, before any model loads."""
    from soma_local.engine.monitors import resolve_monitors
    from soma_local.s1.factory import check_spec

    check_fits_context(args.max_tokens, args.n_ctx)
    check_spec(args.s1)
    options = s2_options(args)  # an unknown --s2 runtime or a missing GGUF is refused here
    question = read_question(args.question, args.file)
    monitors = resolve_monitors(args.monitor or DEFAULT_MONITORS)
    flags = parse_thresholds(args.threshold or [], [m.name for m in monitors])
    trace = args.trace or writable_file(str(Path("runs") / f"{datetime.now():%Y%m%d-%H%M%S}.jsonl"))
    return question, monitors, flags, trace, options


def cmd_run(args) -> int:
    from soma_local.cli.view import LiveView, json_summary
    from soma_local.s1.factory import DEFAULT_S1
    from soma_local.supervisor import Supervisor

    question, monitors, flags, trace_path, options = _prepare(args)
    view = LiveView(sys.stdout, sys.stderr, quiet=args.quiet)
    with Supervisor(**options.model_dump(), s1=args.s1 or DEFAULT_S1, monitors=monitors, thresholds=flags,
                    calibration=args.calibration, mode=args.mode, adapters=args.adapters,
                    scan_interval=args.scan_interval, line_break_slack=args.line_break_slack,
                    max_tokens=args.max_tokens or args.n_ctx,  # default: whatever the context leaves
                    s1_temperature=args.s1_temperature, warn=view.warn, prompt_progress=view.prompt_progress) as sup:
        adapters = f" + adapters ({', '.join(sup.adapted)})" if sup.adapted else ""
        view.header(question, f"S2 {sup.s2_name} | S1 {sup.s1_name}{adapters} | threads {sup.threads} | trace "
                    f"{trace_path}", sup.threshold_sources,
                    f"inf (mode {args.mode})" if MODES[args.mode][1] != "at_h" else None)
        try:
            run = sup.run(question, trace=trace_path, on_event=view.on_event)
        except KeyboardInterrupt:
            view.interrupted(str(trace_path))
            return 130
    view.summary(run)
    if args.json:
        print(json_summary(run), flush=True)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    run = sub.add_parser("run", help="supervise S2 on one question", description=(
        "Supervise S2 on one question and stream its thinking, each S1 scan (p, S), reminders, a takeover "
        "and the answer. Bad arguments are reported before any model loads."))
    run.add_argument("question", nargs="?", help="the question; '-' reads stdin (none at all: a demo question)")
    run.add_argument("--file", type=existing_file, help="read the question from a UTF-8 text file")
    run.add_argument("--s1", help="S1 spec: classifier[:NAME|FOLDER], readout[:GGUF], jev[:openrouter|BASE_URL] or "
                     "none (default: classifier)")
    run.add_argument("--s1-temperature", type=positive_float,
                     help="S1 temperature T in sigmoid(z/T) (default: the S1's own)")
    add_adapter_argument(run)
    run.add_argument("--monitor", action="append", help="monitor name or .toml path, repeatable (default: "
                     + " and ".join(DEFAULT_MONITORS) + ")")
    run.add_argument("--threshold", action="append", metavar="NAME=H",
                     help="takeover threshold h for one monitor, repeatable (default: calibration file, else the monitor's)")
    run.add_argument("--calibration", help="calibration file for h when no --threshold (default: "
                     "$SOMA_CALIBRATION or calibration/thresholds.json)")
    run.add_argument("--mode", default="soma", choices=list(MODES),
                     help="soma: remind, then take over at h; remind_only: never take over; no_reminder: take over "
                     "without reminding; readout*: never take over, every possible takeover on a side branch; scan_only: "
                     "scans and records p, never reminds or takes over")
    run.add_argument("--scan-interval", type=positive_int, default=256, help="thinking tokens between scans (X)")
    run.add_argument("--line-break-slack", type=nonnegative_int, default=128, help="max tokens to the next line break")
    run.add_argument("--max-tokens", type=positive_int,
                     help="generation limit (default: whatever --n-ctx leaves after the prompt)")
    add_s2_arguments(run)
    run.add_argument("--trace", type=writable_file, help="trace JSONL path (default: runs/<time>.jsonl)")
    run.add_argument("-q", "--quiet", action="store_true", help="print only the answer (warnings and errors still go to stderr)")
    run.add_argument("--json", action="store_true", help="end with one JSON line: stop, answer, takeover, counts, h and trace path")
    run.set_defaults(func=cmd_run)

