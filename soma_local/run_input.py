"""``soma run``'s arguments checked before any model loads: one clear line per mistake (CLI exit 2).

Loading S2 and S1 takes seconds to minutes on a small machine, so everything that can be wrong with
the arguments alone (numbers out of range, unreadable files, unknown monitor names, a question that
is empty or not UTF-8) is found here first. Only reading files and standard input touches the outside.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import BinaryIO

from soma_local.errors import SomaError

DEMO_QUESTION = (
    "A bakery sells muffins for $3 each and cookies for $1.50 each. On Monday it sold 48 muffins and "
    "twice as many cookies. On Tuesday it sold a third fewer muffins than on Monday and 30 more cookies "
    "than on Monday. How much money did the bakery make over the two days? Check your work."
)


def _utf8(data: bytes, where: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SomaError(f"{where}: not UTF-8 text (byte {exc.start} is 0x{data[exc.start]:02x})") from None


def read_text_file(path: str, what: str) -> str:
    """A UTF-8 text file named on the command line, or one line saying why it cannot be read."""
    p = Path(path)
    if p.is_dir():
        raise SomaError(f"{what} {path}: is a directory, not a file")
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        raise SomaError(f"{what} {path}: no such file") from None
    except OSError as exc:
        raise SomaError(f"{what} {path}: cannot be read ({exc.strerror})") from None
    return _utf8(data, f"{what} {path}")


def read_question(question: str | None, file: str | None, stdin: BinaryIO | None = None) -> str:
    """The question from ``--file``, standard input (``-``), the argument, or the demo question when
    none is given at all. An empty question is an error, never the demo."""
    if file and question:
        raise SomaError("give the question either as an argument or with --file, not both")
    if file:
        text, where = read_text_file(file, "--file"), f"--file {file}"
    elif question == "-":
        text, where = _utf8((stdin or sys.stdin.buffer).read(), "standard input"), "standard input"
    elif question is None:
        return DEMO_QUESTION
    else:
        text, where = question, "the question"
    if not text.strip():
        raise SomaError(f"{where} is empty" if where != "standard input" else "no question on standard input")
    return text.strip()


def parse_thresholds(pairs: list[str], monitors: list[str]) -> dict[str, float]:
    """``NAME=H`` pairs for known monitors, h > 0 (``inf``: never take over)."""
    out = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        try:
            h = float(value)
        except ValueError:
            sep = ""
        if not sep:
            raise SomaError(f"--threshold takes NAME=H (for example unanswerable=3), got '{pair}'")
        if name not in monitors:
            raise SomaError(f"--threshold {pair}: no monitor '{name}' in this run (monitors: {', '.join(monitors)})")
        if math.isnan(h) or not h > 0:
            raise SomaError(f"--threshold {pair}: h must be a number > 0 (inf: never take over)")
        out[name] = h
    return out


def check_numbers(args) -> None:
    """Ranges of the numeric options, in the order ``--help`` lists them."""
    rules = [
        ("--scan-interval", args.scan_interval, args.scan_interval > 0, "must be > 0"),
        ("--line-break-slack", args.line_break_slack, args.line_break_slack >= 0, "must be >= 0"),
        ("--max-tokens", args.max_tokens, args.max_tokens is None or args.max_tokens > 0, "must be > 0"),
        ("--temperature", args.temperature, args.temperature >= 0, "must be >= 0 (0 is greedy)"),
        ("--top-p", args.top_p, 0 < args.top_p <= 1, "must be in (0, 1]"),
        ("--top-k", args.top_k, args.top_k >= 0, "must be >= 0 (0 is off)"),
        ("--n-ctx", args.n_ctx, args.n_ctx >= 64, "must be >= 64"),
        ("--threads", args.threads, args.threads is None or args.threads > 0, "must be > 0"),
        ("--s1-temperature", args.s1_temperature, args.s1_temperature is None or args.s1_temperature > 0,
         "must be > 0"),
    ]
    for flag, value, ok, rule in rules:
        if not ok or (isinstance(value, float) and math.isnan(value)):
            raise SomaError(f"{flag} {value}: {rule}")
    if args.max_tokens is not None and args.max_tokens >= args.n_ctx:
        raise SomaError(f"--max-tokens {args.max_tokens} does not fit the context (--n-ctx {args.n_ctx}): "
                        "raise --n-ctx or lower --max-tokens")


def check_trace_path(path: str) -> Path:
    """A trace path that can be written: not a directory, its folder creatable."""
    p = Path(path)
    if p.is_dir():
        raise SomaError(f"--trace {path}: is a directory; give a file path such as {p / 'run.jsonl'}")
    parent = next((a for a in [p.parent, *p.parent.parents] if a.exists()), None)
    if parent is not None and not parent.is_dir():
        raise SomaError(f"--trace {path}: {parent} is a file, not a folder")
    return p

