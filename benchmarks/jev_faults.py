"""``soma run --s1 jev`` against jevcompat's mock under every fault it offers (plus rate limiting).

For each mode a fresh mock runs on a free loopback port, the real CLI supervises S2 with the Jev S1
pointed at it, and the trace is read back: the run must end normally and every scan whose answers
were unusable must be recorded as missing (p = None, with the reason). Prints one row per mode.

    python -m benchmarks.jev_faults [--max-tokens 600] [--scan-interval 64] [--fault F ...]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import time
from pathlib import Path

from jevcompat.mock import FAULTS, MockConfig, Running

from soma_local.cli.main import main as soma
from soma_local.engine.trace import RunEnd, Scan, read_trace
from soma_local.s1.jev import CUSTOM_KEY_ENV

KEYED = {"auth-x-api-key", "auth-plain", "auth-invalid-403-text"}  # observable only with a key
KEY = "jev-faults-benchmark-key"


def mock_config(mode: str) -> MockConfig:
    if mode == "clean":
        return MockConfig()
    if mode == "rate-limited":
        return MockConfig(busy_every=2)  # every 2nd request: 429 with Retry-After
    return MockConfig(key=KEY if mode in KEYED else None, faults=frozenset({mode}))


def run_mode(mode: str, args, out: Path) -> dict:
    cfg = mock_config(mode)
    trace, log = out / f"{mode}.jsonl", out / f"{mode}.log"
    trace.unlink(missing_ok=True)
    env_key = os.environ.pop(CUSTOM_KEY_ENV, None)
    if cfg.key:
        os.environ[CUSTOM_KEY_ENV] = cfg.key
    t0 = time.perf_counter()
    try:
        with Running(cfg) as mock, log.open("w") as fh, contextlib.redirect_stdout(fh), contextlib.redirect_stderr(fh):
            rc = soma([
                "run", args.question, "--s1", f"jev:{mock.url}", "--max-tokens", str(args.max_tokens),
                "--scan-interval", str(args.scan_interval), "--seed", str(args.seed), "--trace", str(trace),
                *(["--threads", str(args.threads)] if args.threads else []),
            ])
    finally:
        os.environ.pop(CUSTOM_KEY_ENV, None)
        if env_key is not None:
            os.environ[CUSTOM_KEY_ENV] = env_key
    records = list(read_trace(trace))
    end = records[-1] if records and isinstance(records[-1], RunEnd) else None
    scans = [r for r in records if isinstance(r, Scan)]
    missing = sum(1 for s in scans for m in s.monitors.values() if m.p is None)
    consistent = end is not None and end.failed_scans == sum(1 for s in scans if s.error)
    return {
        "mode": mode, "rc": rc, "stop": end.stop if end else "-", "scans": len(scans),
        "failed": end.failed_scans if end else -1, "missing_p": missing, "consistent": consistent,
        "requests": cfg.requests, "error": next((s.error for s in scans if s.error), "") or "",
        "seconds": time.perf_counter() - t0,
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.jev_faults", description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--fault", action="append", help="only these modes (default: clean, every fault, rate-limited)")
    parser.add_argument("--question", default="List the first twenty prime numbers and explain for each why it is prime.")
    parser.add_argument("--max-tokens", type=int, default=600)
    parser.add_argument("--scan-interval", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=Path("runs/jev-faults"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    modes = args.fault or ["clean", *FAULTS, "rate-limited"]
    print(f"{'mode':24} {'rc':>2} {'stop':16} {'scans':>5} {'failed':>6} {'p=None':>6} {'req':>4} {'s':>5}  first error")
    rows = []
    for mode in modes:
        r = run_mode(mode, args, args.out)
        rows.append(r)
        print(f"{r['mode']:24} {r['rc']:>2} {r['stop']:16} {r['scans']:>5} {r['failed']:>6} {r['missing_p']:>6} "
              f"{r['requests']:>4} {r['seconds']:>5.0f}  {r['error'][:90]}", flush=True)
    ok = [r for r in rows if r["rc"] == 0 and r["stop"] != "-" and r["consistent"]]
    print(f"\n{len(ok)}/{len(rows)} modes completed with a consistent trace; "
          f"{sum(r['failed'] for r in rows)} failed scans recorded over {sum(r['scans'] for r in rows)} scans "
          f"(traces in {args.out})")
    return 0 if len(ok) == len(rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
