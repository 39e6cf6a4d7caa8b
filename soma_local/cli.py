"""``soma``: the command line. ``soma run`` supervises one question and streams what happens."""

from __future__ import annotations

import argparse
import os
import sys
from datetime import datetime
from pathlib import Path
from typing import get_args

from soma_local.cli_tools import register as register_tools
from soma_local.bench.cli import register as register_bench
from soma_local.errors import SomaError
from soma_local.s2.build import add_s2_arguments
from soma_local.supervise import Mode

DEMO_QUESTION = (
    "A bakery sells muffins for $3 each and cookies for $1.50 each. On Monday it sold 48 muffins and "
    "twice as many cookies. On Tuesday it sold a third fewer muffins than on Monday and 30 more cookies "
    "than on Monday. How much money did the bakery make over the two days? Check your work."
)


class Style:
    """ANSI styling only for a terminal that wants it (NO_COLOR and non-TTY get plain text)."""

    def __init__(self, stream) -> None:
        self.on = stream.isatty() and not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb"

    def __call__(self, text: str, code: str) -> str:
        return f"\033[{code}m{text}\033[0m" if self.on else text


def _read_question(args) -> str:
    if args.file:
        return Path(args.file).read_text(encoding="utf-8").strip()
    if args.question == "-":
        question = sys.stdin.read().strip()
        if not question:
            raise SomaError("no question on standard input")
        return question
    if args.question:
        return args.question
    return DEMO_QUESTION


def _thresholds(pairs: list[str]) -> dict[str, float]:
    out = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        try:
            out[name] = float(value)
        except ValueError:
            sep = ""
        if not sep:
            raise SomaError(f"--threshold takes NAME=H (for example unanswerable=3), got '{pair}'")
    return out


def _calibrated(args, s1, s2, monitors) -> dict[str, float]:
    """Thresholds from the calibration file for this (S1, S2) and run variant; --threshold wins."""
    from soma_local.calibrate import calibrated_thresholds, calibration_path, load_calibration

    if s1 is None:
        return {}
    variant = "no_reminder" if args.mode in ("no_reminder", "readout_no_reminder") else "soma"
    cal = load_calibration(calibration_path(args.calibration))
    return calibrated_thresholds(cal, s1.name, s2.name, [m.name for m in monitors], variant)


def cmd_run(args) -> int:
    from soma_local.monitors import resolve_monitors
    from soma_local.s1.factory import load_s1
    from soma_local.s2.build import build_s2, s2_options
    from soma_local.s2.session import PauseRule, incremental_printer
    from soma_local.supervise import RunConfig, supervise
    from soma_local.trace import Reminder, RunEnd, Scan, Takeover, TraceWriter

    out, err = sys.stdout, sys.stderr
    style = Style(out)
    question = _read_question(args)
    monitors = resolve_monitors(args.monitor or ["overthinking", "unanswerable"])
    options = s2_options(args)
    sampling = options.sampling
    s2 = build_s2(options)
    s1 = load_s1(
        args.s1,
        temperature=args.s1_temperature,
        n_threads=args.threads,
        n_gpu_layers=args.n_gpu_layers,
        tokenizer=s2,
    )
    config = RunConfig(
        mode=args.mode,
        thresholds={**_calibrated(args, s1, s2, monitors), **_thresholds(args.threshold or [])},
        pause=PauseRule(args.scan_interval, args.line_break_slack),
        max_tokens=args.max_tokens,
        sampling=sampling,
    )
    trace_path = args.trace or Path("runs") / f"{datetime.now():%Y%m%d-%H%M%S}.jsonl"
    print(style(f"question: {question}", "1"), file=out)
    print(style(f"S2 {s2.name} | S1 {s1.name if s1 else 'none'} | monitors "
                f"{', '.join(m.name for m in monitors)} | trace {trace_path}", "2"), file=out)
    print(style("<think>", "2"), file=out)
    write = incremental_printer(lambda t: (out.write(style(t, "2")), out.flush()))

    def on_event(record) -> None:
        if isinstance(record, Scan):
            cells = "  ".join(
                f"{name} p={'--' if m.p is None else f'{m.p:.2f}'} S={m.score:.2f}"
                + ("" if m.action == "none" else f" -> {m.action}")
                for name, m in record.monitors.items()
            )
            line = f"[scan {record.index + 1} @ {record.thinking_tokens} tok] {cells}"
            if record.error:
                line += f"  (S1 failed: {record.error})"
            out.write("\n" + style(line, "36") + "\n")
        elif isinstance(record, Reminder):
            out.write(style(f"[reminder · {record.monitor}] {record.text.strip()}", "33;1") + "\n")
        elif isinstance(record, Takeover):
            out.write(style(f"[takeover · {record.monitor}]", "31;1") + style(record.text, "31") + "\n")
        out.flush()

    with TraceWriter(trace_path) as trace:
        result = supervise(question, s2, s1, monitors, config, trace, on_piece=write, on_event=on_event)
    end: RunEnd = result.end
    t, tm = end.tokens, end.timings
    print("\n" + style("answer:", "1"), result.answer.strip() or "(none)", file=out)
    share = lambda x: f"{100 * x / tm.wall:.0f}%" if tm.wall > 0 else "-"
    print(
        style(
            f"stop={end.stop} | tokens: thinking {t.thinking}, answer {t.answer}, inserted {t.inserted}, "
            f"probe {t.probe} | scans {end.scans} (failed {end.failed_scans}), reminders {end.reminders}, "
            f"takeover {end.takeover is not None} | time {tm.wall:.1f}s: S2 "
            f"{share(tm.s2_decode + tm.s2_prefill)}, S1 {share(tm.s1)}, loop {share(tm.loop)} | "
            f"decode {t.thinking + t.answer + t.probe} tok in {tm.s2_decode:.1f}s",
            "1",
        ),
        file=out,
    )
    s2.close()
    if s1 is not None:
        s1.close()
    return 0


def cmd_serve(args) -> int:
    """Serve a local S1 as a Jev-compatible /v1/systemone (loopback by default)."""
    from soma_local.s1.factory import load_s1
    from soma_local.server import serve

    key = os.environ.get(args.key_env) if args.key_env else None
    if args.key_env and not key:
        raise SomaError(f"--key-env {args.key_env}: that environment variable is empty")
    s1 = load_s1(args.s1, temperature=args.s1_temperature, n_threads=args.threads, n_gpu_layers=args.n_gpu_layers)
    if s1 is None:
        raise SomaError("--s1 none: there is no S1 to serve")
    print(f"soma serve: {s1.name} on http://{args.host}:{args.port}/v1/systemone"
          + (" (key required)" if key else " (no key)"), file=sys.stderr)
    serve(s1, host=args.host, port=args.port, api_key=key, max_body_bytes=args.max_body_bytes,
          max_pending=args.max_pending)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="soma", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="supervise S2 on one question")
    run.add_argument("question", nargs="?", help="the question; '-' reads stdin (default: a demo question)")
    run.add_argument("--file", help="read the question from a file")
    run.add_argument("--s1", help="S1 spec: classifier[:NAME|FOLDER], readout[:GGUF], jev[:openrouter|BASE_URL] or none (default: classifier)")
    run.add_argument("--s1-temperature", type=float, help="S1 temperature T in sigmoid(z/T)")
    run.add_argument("--monitor", action="append", help="monitor name or .toml path (repeatable)")
    run.add_argument("--threshold", action="append", help="NAME=H takeover threshold (repeatable)")
    run.add_argument("--calibration", help="calibration file for h when no --threshold (default: "
                     "$SOMA_CALIBRATION or calibration/thresholds.json)")
    run.add_argument("--mode", default="soma", choices=list(get_args(Mode)))
    run.add_argument("--scan-interval", type=int, default=256, help="thinking tokens between scans (X)")
    run.add_argument("--line-break-slack", type=int, default=128, help="max tokens to the next line break")
    run.add_argument("--max-tokens", type=int, default=32768, help="generation limit")
    add_s2_arguments(run)
    run.add_argument("--trace", help="trace JSONL path (default: runs/<time>.jsonl)")
    run.set_defaults(func=cmd_run)
    srv = sub.add_parser("serve", help="serve a local S1 as a Jev-compatible /v1/systemone")
    srv.add_argument("--s1", help="S1 spec to serve (default: the default local S1)")
    srv.add_argument("--s1-temperature", type=float, help="S1 temperature T in sigmoid(z/T)")
    srv.add_argument("--host", default="127.0.0.1")
    srv.add_argument("--port", type=int, default=8000)
    srv.add_argument("--key-env", help="require Authorization: Bearer <the key in this environment variable>")
    srv.add_argument("--max-body-bytes", type=int, default=1 << 20, help="request size limit (after zstd too)")
    srv.add_argument("--max-pending", type=int, default=64, help="queued requests before 529 overloaded")
    srv.add_argument("--threads", type=int, help="CPU threads for the S1 (default: all cores)")
    srv.add_argument("--n-gpu-layers", type=int, default=0, help="-1 offloads all layers")
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
        return 130


if __name__ == "__main__":
    sys.exit(main())
