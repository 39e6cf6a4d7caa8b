"""What a portable llama.cpp build costs against a native one, and whether the two write the same text.

``scripts/setup.sh`` builds llama-cpp-python into ``~/.cache/soma-local/wheels/`` (``$SOMA_CACHE_DIR``),
one folder per set of build flags: ``portable`` (AVX2/FMA/F16C, the default) and, once someone ran
``SOMA_LLAMA_BUILD=native make setup``, ``native`` (``-march=native``). This script unpacks each wheel found
there (or given with ``--wheel``) and runs the same measurement in a child process per build, the builds
taking turns within each round and the first alternating between rounds, so a machine that slows down
slows both alike:

- the embedded SmolLM2 decodes exactly ``--tokens`` tokens of the demo question at a fixed seed (a run that
  ends early starts again from the prompt; only decoding is timed), with ``--threads`` threads;
- the generated ids are hashed: builds that write the same text print the same digest.

It prints each build's flags, median decode tok/s, its ratio to the first build and whether its text
equals the first build's. Usage::

  SOMA_LLAMA_BUILD=native make setup && make setup     # build the native wheel too, then back to portable
  .venv/bin/python -m benchmarks.build_cost --rounds 5
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import time
import zipfile
from pathlib import Path


def cache_dir() -> Path:
    return Path(os.environ.get("SOMA_CACHE_DIR", Path.home() / ".cache" / "soma-local"))


def find_wheels() -> list[Path]:
    """The wheels setup.sh built, portable first: the one every other build is compared with."""
    wheels = sorted((cache_dir() / "wheels").glob("*/llama_cpp_python-*.whl"))
    return sorted(wheels, key=lambda w: "-portable-" not in w.parent.name)


def unpacked(wheel: Path) -> Path:
    """The wheel's files as an import path (a wheel is a zip of its installed layout), unpacked once."""
    target = cache_dir() / "unpacked" / wheel.parent.name
    if not (target / "llama_cpp").is_dir():
        with zipfile.ZipFile(wheel) as z:
            z.extractall(target)
        for lib in target.rglob("*.so*"):  # zip files keep no execute bits
            lib.chmod(0o755)
    return target


def child(tokens: int, threads: int, seed: int) -> dict:
    """One build's measurement, in its own process (a process can load only one llama_cpp)."""
    from soma_local.cli.args import DEMO_QUESTION
    from soma_local.engine.supervise import RunConfig, run_prompt
    from soma_local.s2.base import SamplingParams
    from soma_local.s2.formats import prompt_ids
    from soma_local.s2.llama_cpp import LlamaCppS2, build_info
    from soma_local.s2.model_files import resolve_gguf

    s2 = LlamaCppS2(resolve_gguf(None), n_ctx=4096, n_threads=threads, sampling=SamplingParams(seed=seed))
    ids = prompt_ids(s2, run_prompt(s2, DEMO_QUESTION, RunConfig(), supervised=True)[1])  # the demo's own prompt
    generated: list[int] = []
    seconds = 0.0
    while len(generated) < tokens:
        s2.load_prompt(ids)
        chunk = s2.generate(tokens - len(generated))
        generated += chunk.ids
        seconds += chunk.seconds
        if not chunk.ids:
            break
    s2.close()
    import llama_cpp

    return {"build": build_info(), "module": str(Path(llama_cpp.__file__).parent), "tok_s": len(generated) / seconds,
            "digest": hashlib.sha256(json.dumps(generated).encode()).hexdigest()[:12]}


def measure(path: Path, args) -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(path), os.environ.get("PYTHONPATH")]))}
    cmd = [sys.executable, "-m", "benchmarks.build_cost", "--child", "--tokens", str(args.tokens),
           "--threads", str(args.threads), "--seed", str(args.seed)]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise SystemExit(f"build_cost: the build in {path} failed:\n{out.stderr[-2000:]}")
    result = json.loads(out.stdout.strip().splitlines()[-1])
    if Path(result["module"]).parent != path:
        raise SystemExit(f"build_cost: the child imported llama_cpp from {result['module']}, not from {path}")
    return result


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.build_cost", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--wheel", action="append", type=Path, help="a llama_cpp_python wheel (repeatable; default: "
                    "every wheel setup.sh built, under $SOMA_CACHE_DIR/wheels)")
    ap.add_argument("--tokens", type=int, default=256, help="tokens decoded per build and round")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.tokens, args.threads, args.seed)))
        return
    wheels = args.wheel or find_wheels()
    if len(wheels) < 2:
        raise SystemExit(f"build_cost: {len(wheels)} build(s) found under {cache_dir() / 'wheels'}; build another "
                         "with SOMA_LLAMA_BUILD=native make setup (then make setup again for the default), or pass --wheel")
    paths = [unpacked(w) for w in wheels]
    runs: dict[Path, list[dict]] = {p: [] for p in paths}
    started = time.perf_counter()
    for r in range(args.rounds):
        for p in (paths if r % 2 == 0 else paths[::-1]):
            runs[p].append(measure(p, args))
    load = os.getloadavg()[0]
    first = statistics.median(x["tok_s"] for x in runs[paths[0]])
    print(f"{args.tokens} tokens of the demo question, seed {args.seed}, {args.threads} threads, {args.rounds} rounds "
          f"({time.perf_counter() - started:.0f} s; load average at the end {load:.1f} on {os.cpu_count()} cores)")
    print(f"{'build':<44} {'tok/s':>7} {'ratio':>6} {'text':>8}  flags")
    for wheel, p in zip(wheels, paths):
        med = statistics.median(x["tok_s"] for x in runs[p])
        digests = {x["digest"] for x in runs[p]}
        same = "same" if digests == {runs[paths[0]][0]["digest"]} else "OTHER"
        print(f"{wheel.parent.name:<44} {med:>7.1f} {med / first:>6.3f} {same:>8}  {runs[p][0]['build']}")


if __name__ == "__main__":
    main()
