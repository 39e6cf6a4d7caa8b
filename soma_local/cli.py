"""soma: supervise a local reasoning model (S2) with a fast monitor (S1); `soma run` streams one question."""

from __future__ import annotations

import argparse
import os
import sys
from datetime import datetime
from pathlib import Path
from typing import get_args

from soma_local import __version__
from soma_local.cli_tools import register as register_tools
from soma_local.bench.cli import register as register_bench
from soma_local.decide import MAX_REQUEST_TOKENS, MAX_STATE_TOKENS, Limits
from soma_local.errors import SomaError
from soma_local.s2.build import THREADS_HELP, add_s2_arguments
from soma_local.supervise import Mode

DESCRIPTION = (
    "soma: a fast System One (S1) watches a System Two (S2) reasoning model while it thinks, reminds it "
    "when a monitored problem shows, and takes over when the evidence persists. Everything runs locally."
)


def _prepare_run(args):
    """Everything about the arguments that can be wrong, checked before any model loads."""
    from soma_local.calibrate import calibration_path, load_calibration
    from soma_local.models import resolve_gguf
    from soma_local.monitors import resolve_monitors
    from soma_local.run_input import check_numbers, check_trace_path, parse_thresholds, read_question, read_text_file
    from soma_local.s1.factory import check_spec
    from soma_local.s2.build import s2_options

    check_numbers(args)
    check_spec(args.s1)
    options = s2_options(args)  # an unknown --s2 runtime is refused here
    question = read_question(args.question, args.file)
    monitors = resolve_monitors(args.monitor or ["overthinking", "unanswerable"])
    flags = parse_thresholds(args.threshold or [], [m.name for m in monitors])
    if args.chat_template:
        read_text_file(args.chat_template, "--chat-template")
    trace = check_trace_path(args.trace or str(Path("runs") / f"{datetime.now():%Y%m%d-%H%M%S}.jsonl"))
    cal_path = calibration_path(args.calibration)
    cal = load_calibration(cal_path)
    if options.runtime == "llama_cpp":
        resolve_gguf(args.s2_model)  # a missing GGUF is named before anything loads
    return question, monitors, flags, trace, (cal, cal_path), options


def cmd_run(args) -> int:
    from soma_local.calibrate import resolve_thresholds
    from soma_local.run_view import LiveView, json_summary
    from soma_local.s1.factory import load_s1
    from soma_local.s2.build import build_s2
    from soma_local.s2.llama_cpp import default_threads
    from soma_local.s2.session import PauseRule
    from soma_local.supervise import READOUT_MODES, RunConfig, supervise
    from soma_local.trace import TraceWriter

    question, monitors, flags, trace_path, (cal, cal_path), options = _prepare_run(args)
    view = LiveView(sys.stdout, sys.stderr, quiet=args.quiet)
    threads = args.threads or default_threads()
    options = options.model_copy(update={"threads": threads})
    sampling = options.sampling
    s2 = build_s2(options)
    s1 = load_s1(args.s1, temperature=args.s1_temperature, n_threads=threads, n_gpu_layers=args.n_gpu_layers,
                 tokenizer=s2)
    variant = "no_reminder" if args.mode in ("no_reminder", "readout_no_reminder") else "soma"
    thresholds = {} if s1 is None else resolve_thresholds(
        {m.name: m.default_threshold for m in monitors}, flags, cal, cal_path, s1.name, s2.name,
        variant, s1.version)
    fixed = args.mode == "remind_only" or args.mode in READOUT_MODES
    view.header(question, f"S2 {s2.name} | S1 {s1.name if s1 else 'none'} | threads {threads} | trace {trace_path}",
                thresholds, f"inf (mode {args.mode})" if fixed else None)
    s2.prompt_progress = view.prompt_progress
    config = RunConfig(
        mode=args.mode,
        thresholds={name: t.h for name, t in thresholds.items()},
        pause=PauseRule(args.scan_interval, args.line_break_slack),
        max_tokens=args.max_tokens or args.n_ctx,  # default: whatever the context leaves
        sampling=sampling,
    )
    with TraceWriter(trace_path) as trace:
        try:
            result = supervise(question, s2, s1, monitors, config, trace, on_piece=view.on_piece,
                               on_event=view.on_event)
        except KeyboardInterrupt:
            view.interrupted(str(trace_path))
            return 130
    view.summary(result.end)
    if args.json:
        print(json_summary(result.end, view.takeover_monitor, str(trace_path), thresholds), flush=True)
    s2.close()
    if s1 is not None:
        s1.close()
    return 0


def cmd_serve(args) -> int:
    """Serve a local S1 as a Jev-compatible /v1/systemone (loopback by default)."""
    from soma_local.s1.factory import load_s1
    from soma_local.server import serve

    if min(args.max_state_tokens, args.max_request_tokens) < 1:
        raise SomaError("--max-state-tokens and --max-request-tokens must be at least 1")
    key = os.environ.get(args.key_env) if args.key_env else None
    if args.key_env and not key:
        raise SomaError(f"--key-env {args.key_env}: that environment variable is empty")
    s1 = load_s1(args.s1, temperature=args.s1_temperature, n_threads=args.threads, n_gpu_layers=args.n_gpu_layers)
    if s1 is None:
        raise SomaError("--s1 none: there is no S1 to serve")
    print(f"soma serve: {s1.name} on http://{args.host}:{args.port}/v1/systemone"
          + (" (key required)" if key else " (no key)"), file=sys.stderr)
    serve(s1, host=args.host, port=args.port, api_key=key, max_body_bytes=args.max_body_bytes,
          max_pending=args.max_pending, limits=Limits(args.max_state_tokens, args.max_request_tokens))
    return 0


class _Help(argparse.RawDescriptionHelpFormatter):
    """Shows each option's default (unless it is unset or a plain switch)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        unset = action.default is None or action.default is False or action.default == argparse.SUPPRESS
        if action.option_strings and "%(default)" not in text and "default:" not in text and not unset:
            text += " (default: %(default)s)"
        return text


class _Parser(argparse.ArgumentParser):
    """Every parser and subparser gets the defaults-showing help."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("formatter_class", _Help)
        super().__init__(*args, **kwargs)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="soma", description=DESCRIPTION)
    parser.add_argument("--version", action="version", version=f"soma {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    run = sub.add_parser("run", help="supervise S2 on one question", description=(
        "Supervise S2 on one question and stream its thinking, each S1 scan (p, S), reminders, a takeover "
        "and the answer. Bad arguments are reported before any model loads."))
    run.add_argument("question", nargs="?", help="the question; '-' reads stdin (none at all: a demo question)")
    run.add_argument("--file", help="read the question from a UTF-8 text file")
    run.add_argument("--s1", help="S1 spec: classifier[:NAME|FOLDER], readout[:GGUF], jev[:openrouter|BASE_URL] or none (default: classifier)")
    run.add_argument("--s1-temperature", type=float, help="S1 temperature T in sigmoid(z/T) (default: the S1's own)")
    run.add_argument("--monitor", action="append", help="monitor name or .toml path, repeatable (default: overthinking and unanswerable)")
    run.add_argument("--threshold", action="append", metavar="NAME=H",
                     help="takeover threshold h for one monitor, repeatable (default: calibration file, else the monitor's)")
    run.add_argument("--calibration", help="calibration file for h when no --threshold (default: "
                     "$SOMA_CALIBRATION or calibration/thresholds.json)")
    run.add_argument("--mode", default="soma", choices=list(get_args(Mode)),
                     help="soma: remind, then take over at h; remind_only: never take over; no_reminder: take over "
                     "without reminding; readout*: never take over, every possible takeover on a side branch")
    run.add_argument("--scan-interval", type=int, default=256, help="thinking tokens between scans (X)")
    run.add_argument("--line-break-slack", type=int, default=128, help="max tokens to the next line break")
    run.add_argument("--max-tokens", type=int, help="generation limit (default: whatever --n-ctx leaves after the prompt)")
    add_s2_arguments(run)
    run.add_argument("--trace", help="trace JSONL path (default: runs/<time>.jsonl)")
    run.add_argument("-q", "--quiet", action="store_true", help="print only the answer (warnings and errors still go to stderr)")
    run.add_argument("--json", action="store_true", help="end with one JSON line: stop, answer, takeover, counts, h and trace path")
    run.set_defaults(func=cmd_run)
    srv = sub.add_parser("serve", help="serve a local S1 as a Jev-compatible /v1/systemone")
    srv.add_argument("--s1", help="S1 spec to serve (default: the default local S1)")
    srv.add_argument("--s1-temperature", type=float, help="S1 temperature T in sigmoid(z/T) (default: the S1's own)")
    srv.add_argument("--host", default="127.0.0.1", help="address to listen on (loopback keeps it on this machine)")
    srv.add_argument("--port", type=int, default=8000, help="TCP port")
    srv.add_argument("--key-env", help="require Authorization: Bearer <the key in this environment variable>")
    srv.add_argument("--max-body-bytes", type=int, default=1 << 20, help="request size limit (after zstd too)")
    srv.add_argument("--max-pending", type=int, default=64, help="queued requests before 529 overloaded")
    srv.add_argument("--max-state-tokens", type=int, default=MAX_STATE_TOKENS,
                     help="longest state read, in the S1's tokens (413 beyond); longer than the S1 window: read in windows")
    srv.add_argument("--max-request-tokens", type=int, default=MAX_REQUEST_TOKENS,
                     help="S1 input tokens one request may cost, options x state windows (413 beyond)")
    srv.add_argument("--threads", type=int, help=THREADS_HELP)
    srv.add_argument("--n-gpu-layers", type=int, default=0, help="S1 layers on the GPU (readout S1); -1 offloads all")
    srv.set_defaults(func=cmd_serve)
    register_tools(sub)
    register_bench(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except SomaError as exc:
        print(f"soma: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\nsoma: interrupted (Ctrl-C)", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
