"""``soma run``: supervise S2 on one question, streaming its thinking, each scan, reminders, a takeover
and the answer."""

from __future__ import annotations

import argparse
import sys
from datetime import datetime
from pathlib import Path

from soma_local.cli.args import (
    add_s2_arguments, add_supervision_arguments, check_fits_context, existing_file, parse_thresholds, positive_int,
    read_question, s2_options, supervision, writable_file,
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
    from soma_local.supervisor import Supervisor

    question, monitors, flags, trace_path, options = _prepare(args)
    view = LiveView(sys.stdout, sys.stderr, quiet=args.quiet)
    with Supervisor(**options.model_dump(), **supervision(args, monitors, flags),
                    max_tokens=args.max_tokens or args.n_ctx,  # default: whatever the context leaves
                    warn=view.warn, prompt_progress=view.prompt_progress) as sup:
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
    add_supervision_arguments(run)
    run.add_argument("--max-tokens", type=positive_int,
                     help="generation limit (default: whatever --n-ctx leaves after the prompt)")
    add_s2_arguments(run)
    run.add_argument("--trace", type=writable_file, help="trace JSONL path (default: runs/<time>.jsonl)")
    run.add_argument("-q", "--quiet", action="store_true", help="print only the answer (warnings and errors still go to stderr)")
    run.add_argument("--json", action="store_true", help="end with one JSON line: stop, answer, takeover, counts, h and trace path")
    run.set_defaults(func=cmd_run)

