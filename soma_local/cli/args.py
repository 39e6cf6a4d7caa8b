"""Every command-line argument check, in one place: one clear line per mistake (``soma: error:``, exit 2)
before any model loads.

Loading S2 and S1 takes seconds to minutes on a small machine, so everything that can be wrong with
the arguments alone is found first: numbers out of range and unreadable files by the argument types
below (argparse applies them while parsing, and ``Parser.error`` turns its complaint into a
``UsageError`` that ``main`` prints as one line), the rest (a question that is empty or not UTF-8,
thresholds of unknown monitors, options that contradict each other) by the functions after them.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, Callable

from soma_local.errors import SomaError
from soma_local.s1.factory import DEFAULT_S1_HELP
from soma_local.s2.build import S2Options

if TYPE_CHECKING:
    from soma_local.calibration.selection import Selection
    from soma_local.calibration.thresholds import Objective
    from soma_local.engine.monitors import Monitor

DEMO_QUESTION = (
    "A bakery sells muffins for $3 each and cookies for $1.50 each. On Monday it sold 48 muffins and "
    "twice as many cookies. On Tuesday it sold a third fewer muffins than on Monday and 30 more cookies "
    "than on Monday. How much money did the bakery make over the two days? Check your work."
)
THREADS_HELP = ("CPU threads for S2 and S1 (default: half the usable cores, at least 1; all cores make "
                "llama.cpp's spinning threads stall whenever anything else runs, see docs/threads.md)")


class UsageError(SomaError):
    """A command line argparse or a check below refused."""


class _Help(argparse.RawDescriptionHelpFormatter):
    """Shows each option's default (unless it is unset or a plain switch)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        # A switch (--no-adapters: store_false, so its default is True) takes no value to show a default of.
        unset = action.default is None or action.nargs == 0 or action.default == argparse.SUPPRESS
        if action.option_strings and "%(default)" not in text and "default:" not in text and not unset:
            text += " (default: %(default)s)"
        return text


class Parser(argparse.ArgumentParser):
    """Every parser and subparser shows defaults in its help and reports a bad argument as one
    ``UsageError`` line (``--port 99999: must be ...``) instead of a usage dump."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("formatter_class", _Help)
        super().__init__(*args, **kwargs)

    def error(self, message: str):
        message = re.sub(r"^argument ([^:]+): ", r"\1 ", message)
        raise UsageError(f"{message} (see {self.prog} --help)")


# ---- argument types: a value and what it must be ----------------------------------------------------

def _number(kind: Callable[[str], float], rule: str, ok: Callable[[float], bool]) -> Callable[[str], float]:
    def check(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text}: {rule}") from None
        if (isinstance(value, float) and math.isnan(value)) or not ok(value):
            raise argparse.ArgumentTypeError(f"{text}: {rule}")
        return value

    check.__name__ = rule  # what argparse names in its own messages
    return check


positive_int = _number(int, "must be a whole number > 0", lambda v: v > 0)
nonnegative_int = _number(int, "must be a whole number >= 0", lambda v: v >= 0)
positive_float = _number(float, "must be a number > 0", lambda v: v > 0)
nonnegative_float = _number(float, "must be a number >= 0", lambda v: v >= 0)
fraction = _number(float, "must be a number in [0, 1)", lambda v: 0 <= v < 1)
held_share = _number(float, "must be a share from 0.1 to 0.5", lambda v: 0.1 <= v <= 0.5)
top_p = _number(float, "must be in (0, 1]", lambda v: 0 < v <= 1)
port = _number(int, "must be a TCP port, 1-65535", lambda v: 1 <= v <= 65535)
context_size = _number(int, "must be a whole number >= 64", lambda v: v >= 64)
confidence_level = _number(float, "must be a confidence level in (0.5, 1), e.g. 0.9", lambda v: 0.5 < v < 1)
resample_count = _number(int, "must be a whole number >= 100", lambda v: v >= 100)


def existing_file(text: str) -> Path:
    """A path that exists and is not a folder: a regular file, or one to read like one (``/dev/null``,
    a pipe from ``<(...)``), whose contents the caller judges."""
    path = Path(text)
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text}: is a directory, not a file")
    if not path.exists():
        raise argparse.ArgumentTypeError(f"{text}: no such file")
    return path


def existing_folder(text: str) -> Path:
    path = Path(text)
    if not path.is_dir():
        raise argparse.ArgumentTypeError(f"{text}: " + ("not a folder" if path.exists() else "no such folder"))
    return path


def writable_file(text: str) -> Path:
    """A file path that can be written: not a directory, its folder creatable."""
    path = Path(text)
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text}: is a directory; give a file path such as {path / 'run.jsonl'}")
    parent = next((a for a in [path.parent, *path.parent.parents] if a.exists()), None)
    if parent is not None and not parent.is_dir():
        raise argparse.ArgumentTypeError(f"{text}: {parent} is a file, not a folder")
    return path


# ---- S2 options: the same flags on every command that runs S2 ------------------------------------------

def add_s2_arguments(p: argparse.ArgumentParser, *, skip: tuple[str, ...] = ()) -> None:
    """The S2 flags; ``skip`` leaves out those a parser already defines differently."""
    flags = [
        ("--s2", dict(default="llama_cpp", help="S2 runtime: llama_cpp (in-process) or vllm:URL[,URL...] "
                      "(OpenAI-compatible vLLM servers; a question stays on one)")),
        ("--s2-model", dict(help="llama_cpp: GGUF path or embedded name (default: smollm2-135m); vllm: the served "
                            "model's Hugging Face folder, hub id or embedded name (tokenizer and chat template)")),
        ("--chat-template", dict(type=existing_file, help="Jinja chat template file for a model without one")),
        ("--s2-timeout", dict(type=positive_float, default=600.0, help="vllm: seconds one request may take")),
        ("--seed", dict(type=int, default=0, help="S2 sampling seed")),
        ("--temperature", dict(type=nonnegative_float, default=0.6, help="S2 sampling temperature (0: greedy)")),
        ("--top-p", dict(type=top_p, default=0.95, help="S2 nucleus sampling")),
        ("--top-k", dict(type=nonnegative_int, default=0, help="S2 top-k; 0 = off (use 20 for Qwen3)")),
        ("--n-ctx", dict(type=context_size, default=8192,
                         help="llama_cpp: S2 context size in tokens (prompt + generation)")),
        ("--n-gpu-layers", dict(type=int, default=0, help="S2 layers on the GPU; -1 offloads all")),
        ("--threads", dict(type=positive_int, help=THREADS_HELP)),
        ("--flash-attn", dict(action="store_true", help="flash attention in llama.cpp (GPU builds)")),
    ]
    for flag, kw in flags:
        if flag not in skip:
            p.add_argument(flag, **kw)


def s2_options(args: argparse.Namespace) -> S2Options:
    """Options from parsed flags (a flag a parser does not define keeps its default); the runtime spec
    is checked here, and an in-process S2's model file is resolved once, before anything loads."""
    fields = S2Options.model_fields
    values = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items() if k in fields and v is not None}
    options = S2Options(**values)
    if options.runtime == "llama_cpp":
        from soma_local.s2.model_files import resolve_gguf

        options = options.model_copy(update={"s2_model": str(resolve_gguf(options.s2_model))})
    return options


# ---- supervision: S1, its monitors and their h, the same on every command that supervises runs --------

def add_supervision_arguments(p: argparse.ArgumentParser, *, served: bool = False) -> None:
    """How S1 supervises S2 (``soma run``, and ``soma serve-chat`` with ``served``, where these are what a
    request may choose among and the defaults it may override)."""
    from soma_local.engine.supervise import MODES
    from soma_local.supervisor import DEFAULT_MONITORS

    p.add_argument("--s1", help="S1 spec: classifier[:NAME|FOLDER], readout[:GGUF], jev[:openrouter|BASE_URL] or "
                   f"none (default: {DEFAULT_S1_HELP}; classifier:minilm-reader for the S1 trained on the paper's two "
                   "statements alone)")
    p.add_argument("--s1-temperature", type=positive_float,
                   help="S1 temperature T in sigmoid(z/T) (default: the S1's own)")
    add_adapter_argument(p)
    p.add_argument("--monitor", action="append", help="monitor name or .toml path, repeatable (default: "
                   + " and ".join(DEFAULT_MONITORS) + ")" + ("; a request may choose among them" if served else ""))
    p.add_argument("--threshold", action="append", metavar="NAME=H",
                   help="takeover threshold h for one monitor, repeatable (default: calibration file, else the monitor's)")
    p.add_argument("--calibration", help="calibration file for h when no --threshold (default: "
                   "$SOMA_CALIBRATION or calibration/thresholds.json)")
    p.add_argument("--mode", default="soma", choices=list(MODES),
                   help="soma: remind, then take over at h; remind_only: never take over; no_reminder: take over "
                   "without reminding; readout*: never take over, every possible takeover on a side branch; scan_only: "
                   "scans and records p, never reminds or takes over" + ("; a request may set its own" if served else ""))
    p.add_argument("--scan-interval", type=positive_int, default=256, help="thinking tokens between scans (X)")
    p.add_argument("--line-break-slack", type=nonnegative_int, default=128, help="max tokens to the next line break")


def supervision(args: argparse.Namespace, monitors: list[Monitor], thresholds: dict[str, float]) -> dict:
    """The ``Supervisor`` arguments those flags give, with the monitors and typed h already checked."""
    from soma_local.s1.factory import DEFAULT_S1

    return dict(s1=args.s1 or DEFAULT_S1, monitors=monitors, thresholds=thresholds, calibration=args.calibration,
                mode=args.mode, adapters=args.adapters, scan_interval=args.scan_interval,
                line_break_slack=args.line_break_slack, s1_temperature=args.s1_temperature)


# ---- servers: where they listen and who may call them ----------------------------------------------

def add_server_arguments(p: argparse.ArgumentParser, *, default_port: int) -> None:
    """What every soma server takes: address, port, an optional key, the body limit."""
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (loopback keeps it on this machine)")
    p.add_argument("--port", type=port, default=default_port, help="TCP port")
    p.add_argument("--key-env", help="require Authorization: Bearer <the key in this environment variable>")
    p.add_argument("--max-body-bytes", type=positive_int, default=1 << 20, help="request size limit (after zstd too)")


def api_key(args: argparse.Namespace) -> str | None:
    """The key ``--key-env`` names (None: no key required); an empty variable is a mistake, not "no key"."""
    if not args.key_env:
        return None
    key = os.environ.get(args.key_env)
    if not key:
        raise UsageError(f"--key-env {args.key_env}: that environment variable is empty")
    return key


# ---- checks that need more than one argument, or the input itself ------------------------------------

def _utf8(data: bytes, where: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"{where}: not UTF-8 text (byte {exc.start} is 0x{data[exc.start]:02x})") from None


def read_text_file(path: Path, what: str) -> str:
    """A UTF-8 text file named on the command line (``existing_file`` checked that it is one)."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise UsageError(f"{what} {path}: cannot be read ({exc.strerror})") from None
    return _utf8(data, f"{what} {path}")


def read_question(question: str | None, file: Path | None, stdin: BinaryIO | None = None) -> str:
    """The question from ``--file``, standard input (``-``), the argument, or the demo question when
    none is given at all. An empty question is an error, never the demo."""
    if file and question:
        raise UsageError("give the question either as an argument or with --file, not both")
    if file:
        text, where = read_text_file(file, "--file"), f"--file {file}"
    elif question == "-":
        text, where = _utf8((stdin or sys.stdin.buffer).read(), "standard input"), "standard input"
    elif question is None:
        return DEMO_QUESTION
    else:
        text, where = question, "the question"
    if not text.strip():
        raise UsageError(f"{where} is empty" if where != "standard input" else "no question on standard input")
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
            raise UsageError(f"--threshold takes NAME=H (for example unanswerable=3), got '{pair}'")
        if name not in monitors:
            raise UsageError(f"--threshold {pair}: no monitor '{name}' in this run (monitors: {', '.join(monitors)})")
        if math.isnan(h) or not h > 0:
            raise UsageError(f"--threshold {pair}: h must be a number > 0 (inf: never take over)")
        out[name] = h
    return out


def check_fits_context(max_tokens: int | None, n_ctx: int) -> None:
    if max_tokens is not None and max_tokens >= n_ctx:
        raise UsageError(f"--max-tokens {max_tokens} does not fit the context (--n-ctx {n_ctx}): "
                         "raise --n-ctx or lower --max-tokens")


def parse_grid(text: str) -> list[float]:
    """``--grid``: comma-separated thresholds h > 0; h = inf (never take over) is always added."""
    try:
        values = sorted({float(x) for x in text.split(",") if x.strip()} | {math.inf})
    except ValueError:
        raise UsageError(f"--grid takes comma-separated thresholds, got '{text}'") from None
    if any(math.isnan(h) or not h > 0 for h in values):
        raise UsageError(f"--grid {text}: thresholds must be > 0")
    return values


# ---- calibrate and replay: how h is chosen -------------------------------------------------------------

def add_adapter_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--no-adapters", dest="adapters", action="store_false",
                   help="score with the S1 alone, leaving out the monitors' adapters (<monitor>.adapters.json, "
                   "made by soma tune)")


def add_calibration_arguments(p: argparse.ArgumentParser) -> None:
    from soma_local.calibration.thresholds import H_GRID

    p.add_argument("--monitor", default="unanswerable", help="monitor name or .toml path")
    p.add_argument("--s1", help=f"S1 spec (default: {DEFAULT_S1_HELP}; see soma run --help)")
    p.add_argument("--s1-temperature", type=positive_float, help="S1 temperature T in sigmoid(z/T)")
    p.add_argument("--grid", default=",".join(f"{h:g}" for h in H_GRID),
                   help="thresholds h to evaluate (inf is always added)")
    p.add_argument("--limit", type=positive_int, help="questions per file, seeded sample (default: all)")
    p.add_argument("--seed", type=int, default=0, help="seed of the question sample and of S2 sampling")
    p.add_argument("--scan-interval", type=positive_int, default=256, help="thinking tokens between scans (X)")
    p.add_argument("--line-break-slack", type=nonnegative_int, default=128, help="max tokens to the next line break")
    p.add_argument("--threads", type=positive_int, help="CPU threads (default: half the usable cores, at least 1)")
    p.add_argument("--calibration", help="calibration file (default: $SOMA_CALIBRATION or calibration/thresholds.json)")
    p.add_argument("--objective", choices=["fewest_tokens", "abstention"],
                   help="how h is chosen (default: the monitor file's objective)")
    p.add_argument("--delta", type=nonnegative_float, default=0.0, help="accuracy tolerance against h=inf (fraction)")
    p.add_argument("--fa-weight", type=nonnegative_float, default=1.0, help="abstention objective: Abs - w*FA")
    add_selection_arguments(p)


def add_selection_arguments(p: argparse.ArgumentParser) -> None:
    """How h is chosen from the calibration outcomes: every command that chooses h has these."""
    from soma_local.calibration.selection import Selection

    default = Selection()
    p.add_argument("--selection", choices=["bound", "point"], default=default.rule,
                   help="bound: h must beat h=inf at a confidence bound (paired bootstrap of the calibration "
                   "questions), the guard holds the accuracy loss's upper bound to --delta; point: the paper's "
                   "rule on point estimates")
    p.add_argument("--confidence", type=confidence_level, default=default.confidence,
                   help="one-sided level of each bound (the intervals printed use it too)")
    p.add_argument("--resamples", type=resample_count, default=default.resamples, help="bootstrap resamples")


def objective_from(args: argparse.Namespace, monitor: Monitor) -> Objective:
    """``--objective`` where given, else the monitor file's, with ``--delta`` and ``--fa-weight``."""
    from soma_local.calibration.thresholds import Objective, monitor_objective

    if args.objective:
        return Objective(kind=args.objective, delta=args.delta, fa_weight=args.fa_weight)
    return monitor_objective(monitor, args.delta, args.fa_weight)


def selection_from(args: argparse.Namespace) -> Selection:
    """``--selection``, ``--confidence`` and ``--resamples`` as the rule ``choose_threshold`` applies."""
    from soma_local.calibration.selection import Selection

    return Selection(rule=args.selection, confidence=args.confidence, resamples=args.resamples)
