"""S2 decode speed by thread count, the way `soma run` decodes: each token streamed to a terminal.

Why this exists: llama.cpp (built with OpenMP, as llama-cpp-python builds it) synchronises its threads
at a barrier after every operation of every token, and OpenMP threads spin while they wait. When the
threads take every core, anything else that wants a core (the terminal drawing the streamed tokens,
another program, another user) preempts one of them and the others spin until it comes back, so
decoding collapses. `python -m benchmarks.s2_speed` streams nothing, which is why it did not show this.

For each background (as it is, then with one core kept busy by a spin loop) and each OpenMP wait
policy (spin, the default; passive), one child process decodes the same greedy continuation at
every thread count, writing each token to a pseudo-terminal that another process drains.

  .venv/bin/python -m benchmarks.threads [--tokens 120] [--repeats 2] [--model M.gguf]
"""

from __future__ import annotations

import argparse
import json
import os
import pty
import subprocess
import sys

QUESTION = "Write a long story about a cat who learns arithmetic, with every sum worked out."


def child(model: str | None, tokens: int, repeats: int, threads: list[int]) -> None:
    """Runs in a fresh process (the wait policy is read when OpenMP loads): prints one JSON line."""
    from soma_local.s2.model_files import resolve_gguf
    from soma_local.s2.base import SamplingParams
    from soma_local.s2.formats import ThinkingFormat, prompt_for, prompt_ids
    from soma_local.s2.llama_cpp import LlamaCppS2

    # Built with one thread (so soma leaves the wait policy to this script), then set per measurement.
    s2 = LlamaCppS2(resolve_gguf(model), n_ctx=2048, n_threads=1, sampling=SamplingParams(temperature=0))
    ids = prompt_ids(s2, prompt_for(s2, QUESTION, fmt=ThinkingFormat("prompted")))
    master, slave = pty.openpty()
    terminal = subprocess.Popen(["cat"], stdin=master, stdout=subprocess.DEVNULL)  # a terminal's reader
    tty = os.fdopen(slave, "wb", buffering=0)
    rates: dict[int, list[float]] = {t: [] for t in threads}
    for _ in range(repeats):
        for t in threads:
            s2.set_threads(t)
            s2.load_prompt(ids)
            chunk = s2.generate(tokens, on_piece=tty.write)
            rates[t].append(len(chunk.ids) / chunk.seconds)
    terminal.kill()
    s2.close()
    print(json.dumps({str(t): sorted(r)[len(r) // 2] for t, r in rates.items()}))


def main() -> None:
    ap = argparse.ArgumentParser(
        prog="python -m benchmarks.threads", description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--model", help="S2 GGUF path or embedded name (default: smollm2-135m)")
    ap.add_argument("--tokens", type=int, default=120, help="tokens decoded per measurement")
    ap.add_argument("--repeats", type=int, default=2, help="measurements per setting (the median is printed)")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--threads", default=None, help="comma-separated thread counts (default: 1 to every core)")
    args = ap.parse_args()
    from soma_local.threads import default_threads, usable_cores

    threads = [int(x) for x in args.threads.split(",")] if args.threads else list(range(1, usable_cores() + 1))
    if args.child:
        child(args.model, args.tokens, args.repeats, threads)
        return
    print(f"{usable_cores()} usable cores, load average {os.getloadavg()[0]:.1f} at start; soma's default: "
          f"{default_threads()} thread(s); decode tok/s (median of {args.repeats}), {args.tokens} tokens streamed to a pty")
    print(f"{'background':<16} {'OpenMP wait':<12} " + " ".join(f"{f'{t} thr':>8}" for t in threads))
    for background in ("as it is", "one core busy"):
        spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if background != "as it is" else None
        try:
            for policy in ("spin", "passive"):
                # Unset is OpenMP's default (spin a while, then sleep); soma itself never sets it.
                env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
                if policy == "passive":
                    env["OMP_WAIT_POLICY"] = "PASSIVE"
                cmd = [sys.executable, "-m", "benchmarks.threads", "--child", "--tokens", str(args.tokens),
                       "--repeats", str(args.repeats), "--threads", ",".join(map(str, threads))]
                cmd += ["--model", args.model] if args.model else []
                out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout
                rates = json.loads(out.strip().splitlines()[-1])
                print(f"{background:<16} {policy:<12} " + " ".join(f"{rates[str(t)]:8.1f}" for t in threads), flush=True)
        finally:
            if spinner is not None:
                spinner.kill()


if __name__ == "__main__":
    main()
