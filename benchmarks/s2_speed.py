"""S2 speed: is our token loop as fast as llama.cpp's own path? Then the same prompts with and
without supervision in one process.

Three paths generate the same N tokens (default 256) from the same prompt, seed and sampling settings
(temperature 0.6, top_p 0.95 by default), one after another on one loaded model, in an order that
rotates from run to run (each path goes first, second and third equally often), over several rounds:

  native             a loop of C calls and nothing else (``LlamaCppS2.native_loop``): per token one
                     ``llama_sampler_sample`` (the runtime's own C sampler chain) and one
                     ``llama_decode`` of a prebuilt one-token batch through the raw ctypes bindings, no
                     other Python per token: what llama.cpp's own generation costs with this build,
                     sampling included, and the ceiling of any loop driven from Python.
  our loop           ``LlamaCppS2.generate(N)``: the engine's token loop (end check, pieces, stop
                     scan, ids), here with the thinking phase's stop text (``</think>``) as a session
                     passes it.
  create_completion  llama-cpp-python's ``Llama.create_completion(max_tokens=N)`` on the same
                     context (the prompt but its last token decoded beforehand, untimed, as ours).

Each timing is wall clock around the N tokens alone (N decodes and N samples in every path). Every
path must produce the same tokens, so the work is equal: the same logits and equivalent sampler
chains give the same tokens, a warm-up run of the native loop finds, per prompt, a seed whose first N
tokens hold no end of generation (so no path stops early), and the script checks that the three
paths' tokens (create_completion's text) are identical. A path's share of native is the median over
all runs of its tok/s over the native loop's tok/s in the same run; tok/s is the median over runs.
On a busy machine runs a minute apart differ by more than the loops do, so our loop is also measured
against native in alternating 32-token chunks of one sequence (both orders), neighbouring chunks
compared.

Not "native": llama.cpp's own eval counter (``llama_perf_context`` t_eval, the old definition here).
It starts at ``llama_decode`` and stops at the next synchronize, which is the next logits read (the
first call inside ``llama_sampler_sample``), so it counts whatever the caller runs between a decode
and the next sample, our Python included, and leaves the sampler out. The script shows it: the native
loop sleeping 2 ms after each decode raises t_eval by about 2 ms a token while decode time alone does
not move. It is printed beside each path for reference.

The per-token cost table splits one token of the native loop into the C decode (``llama_decode`` +
``llama_synchronize``), the C sampler chain and the rest (ctypes calls, the loop), from a timed
warm-up run; gives what our loop and create_completion add over native (paired, per run); and times
our loop's own bookkeeping alone (``generate`` replaying the recorded tokens with no model behind it).

Then the supervised section: the same prompts with S1 scanning every X tokens and without, tokens/s
and wall-time shares of S2, S1 and the loop.

Absolute figures depend on the machine and on what else runs, so the load is printed at the start
and at the end; compare the ratios within one run. Usage:

  .venv/bin/python -m benchmarks.s2_speed --s1 classifier        # embedded SmolLM2, 2 threads
  .venv/bin/python -m benchmarks.s2_speed --s1 none --rounds 5   # the decode table only
  .venv/bin/python -m benchmarks.s2_speed --model M.gguf --n-gpu-layers -1 --flash-attn
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import subprocess
import time
from dataclasses import dataclass, field, replace
from typing import Iterator

from soma_local.engine.monitors import resolve_monitors
from soma_local.engine.pauses import PauseRule
from soma_local.engine.supervise import RunConfig, supervise
from soma_local.s1.factory import load_s1
from soma_local.s2.base import S2Backend, SamplingParams
from soma_local.s2.formats import ThinkingFormat, backend_thinking, prompt_for, prompt_ids, system_prompt
from soma_local.s2.llama_cpp import LlamaCppS2
from soma_local.s2.model_files import resolve_gguf

PROMPTS = [
    "List the first twenty prime numbers and explain for each why it is prime.",
    "Explain step by step how to compute 37 * 48 by hand, then check the result two different ways.",
    "A train leaves at 9:40 and arrives at 13:15 after two stops of 12 minutes each. How long was it "
    "moving? Show all the steps.",
    "Write out the multiplication table of 7 from 1 to 20 and explain any patterns you see.",
]
PATHS = ("native", "ours", "create_completion")
LABELS = {"native": "native (C loop)", "ours": "our loop", "create_completion": "create_completion"}
STOP_TEXT = b"</think>"  # what a session's thinking chunks pass: the loop scans for it every token
SEED_TRIES = 8  # seeds tried per prompt for N tokens without an end of generation


def median(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def quartiles(xs: list[float]) -> tuple[float, float]:
    if len(xs) < 2:
        return (xs[0], xs[0]) if xs else (float("nan"), float("nan"))
    q = statistics.quantiles(xs, n=4, method="inclusive")
    return q[0], q[2]


def load_report() -> str:
    """The load average and the busiest processes (this one included): what else ran beside the
    measurement."""
    one, five, _ = os.getloadavg()
    text = f"load average {one:.2f} (1 min) {five:.2f} (5 min) on {os.cpu_count()} CPUs; busiest processes:"
    try:
        ps = subprocess.run(["ps", "-eo", "pcpu,args", "--sort=-pcpu"], capture_output=True, text=True,
                            timeout=5).stdout.splitlines()[1:6]
        text += "".join(f"\n    {line.strip()[:100]}" for line in ps)
    except (OSError, subprocess.SubprocessError):
        text += " (ps not available)"
    return text


@dataclass
class Prompt:
    ids: list[int]
    seed: int
    reference: list[int] = field(default_factory=list)  # the tokens every path must produce


def choose_seeds(s2: LlamaCppS2, prompts: list[list[int]], tokens: int, sampling: SamplingParams,
                 split: dict[str, list[float]]) -> list[Prompt]:
    """Per prompt, the first seed whose N tokens hold no end of generation and no stop text (so no
    path stops early), by a timed native run (which also warms the model up and gives the
    decode/sample split of a token)."""
    chosen = []
    for i, ids in enumerate(prompts):
        for k in range(SEED_TRIES):
            seed = sampling.seed + i + 1000 * k
            s2.set_sampling(replace(sampling, seed=seed))
            s2.load_prompt(ids)
            out, wall, dec, smp = s2.native_loop(tokens, timed=True)
            split["decode"].append(dec / tokens)
            split["sample"].append(smp / tokens)
            split["rest"].append((wall - dec - smp) / tokens)
            if not any(s2.is_end(t) for t in out) and STOP_TEXT not in b"".join(map(s2.piece, out)):
                chosen.append(Prompt(ids, seed, out))
                break
        else:
            raise SystemExit(f"prompt {i}: every seed tried ended within {tokens} tokens; lower --tokens")
    return chosen


def run_path(s2: LlamaCppS2, path: str, p: Prompt, tokens: int, sampling: SamplingParams
             ) -> tuple[float, float, float, bool]:
    """(wall seconds for the N tokens, CPU seconds of the process meanwhile, llama.cpp's t_eval
    seconds per token, same tokens as the reference)."""
    s2.set_sampling(replace(sampling, seed=p.seed))
    if path == "create_completion":
        s2.clear_context()
        s2.llm.eval(p.ids[:-1])
        s2.reset_decode_counters()
        c0 = time.process_time()
        t0 = time.perf_counter()
        out = s2.llm.create_completion(
            p.ids, max_tokens=tokens, temperature=sampling.temperature, top_p=sampling.top_p,
            top_k=sampling.top_k, min_p=sampling.min_p, seed=p.seed,
        )
        wall = time.perf_counter() - t0
        cpu = time.process_time() - c0
        text = b"".join(s2.piece(t) for t in p.reference).decode("utf-8", errors="ignore")  # as it decodes
        same = out["usage"]["completion_tokens"] == tokens and out["choices"][0]["text"] == text
        s2.clear_context()
    else:
        s2.load_prompt(p.ids)
        s2.reset_decode_counters()
        c0 = time.process_time()
        if path == "native":
            ids, wall, _, _ = s2.native_loop(tokens)
        else:
            chunk = s2.generate(tokens, stop_text=STOP_TEXT)
            ids, wall = chunk.ids, chunk.seconds
        cpu = time.process_time() - c0
        same = ids == p.reference
    t_eval, n_eval = s2.decode_counters()
    return wall, cpu, t_eval / n_eval, same


def interleaved(s2: LlamaCppS2, p: Prompt, tokens: int, sampling: SamplingParams, chunk: int = 32
                ) -> tuple[list[float], bool]:
    """Our loop against native in alternating chunks of one sequence (the native loop samples with
    the runtime's chain and keeps its tokens, so the sequence is the reference one): two neighbouring
    chunks run within a second of each other, which a busy machine's drift spares. Done twice, each
    path starting once; returns our share of native (native's seconds over ours) for every
    neighbouring pair, and whether the sequence was the reference."""
    ratios, same = [], True
    for first in ("native", "ours"):
        s2.set_sampling(replace(sampling, seed=p.seed))
        s2.load_prompt(p.ids)
        ids, walls = [], {"native": [], "ours": []}
        for j in range(tokens // chunk):
            path = (first, "ours" if first == "native" else "native")[j % 2]
            if path == "native":
                out, wall, _, _ = s2.native_loop(chunk)
            else:
                c = s2.generate(chunk, stop_text=STOP_TEXT)
                out, wall = c.ids, c.seconds
            ids += out
            walls[path].append(wall)
        same &= ids == p.reference[: len(ids)]
        ratios += [n / o for n, o in zip(walls["native"], walls["ours"])]
    return ratios, same


class Replay(S2Backend):
    """The base token loop with no model behind it: ``generate`` over recorded tokens, with the real
    runtime's pieces and end check and no C call for sampling or decoding. What remains per token is
    the loop's own bookkeeping."""

    name = "replay"
    chat_template = None
    bos_token = eos_token = ""

    def __init__(self, s2: LlamaCppS2, ids: list[int]):
        super().__init__()
        self.ids = ids
        self.piece, self.is_end, self.tokenize = s2.piece, s2.is_end, s2.tokenize  # as the runtime's

    def tokenize(self, text, *, special=False, add_bos=False):  # replaced per instance
        raise NotImplementedError

    def piece(self, token):  # replaced per instance
        raise NotImplementedError

    def is_end(self, token):  # replaced per instance
        raise NotImplementedError

    @property
    def context_size(self) -> int:
        return 1 << 30

    def _load(self, ids):
        self._ids = list(ids)
        return 0.0

    def _append(self, ids):
        self._ids += ids
        return 0.0

    def set_sampling(self, params):
        self.sampling = params

    def _sample(self, max_tokens: int, stop_at_newline: bool) -> Iterator[int]:
        for token in itertools.islice(self.ids, max_tokens):
            yield token

    def _keep(self, token: int) -> None:
        pass


def bookkeeping_us(s2: LlamaCppS2, ids: list[int], repeats: int = 30) -> dict[str, float]:
    """Microseconds per token of ``generate``'s own work, best of ``repeats`` (a micro-benchmark)."""
    loop = Replay(s2, ids * 8)
    out = {}
    for name, kwargs in (("stop text", {"stop_text": STOP_TEXT}), ("plain", {})):
        best = float("inf")
        for _ in range(repeats):
            loop.load_prompt([0])
            chunk = loop.generate(len(loop.ids), **kwargs)
            assert len(chunk.ids) == len(loop.ids)
            best = min(best, chunk.seconds / len(chunk.ids))
        out[name] = 1e6 * best
    # create_completion detokenizes the whole completion again after every token: on average half of it
    half = ids[: len(ids) // 2]
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        s2.llm.detokenize(half)
        best = min(best, time.perf_counter() - t0)
    out["detokenize half"] = 1e6 * best
    return out


def t_eval_check(s2: LlamaCppS2, p: Prompt, sampling: SamplingParams, tokens: int = 32,
                 idle: float = 0.002) -> dict[str, float]:
    """What llama.cpp's t_eval counts beyond the decode: ms per token of t_eval minus the time spent
    inside ``llama_decode`` in the same native run (no extra synchronize), with nothing between a
    decode and the next sample, then with ``idle`` seconds of sleep there."""
    out = {}
    for name, sleep in (("busy", 0.0), ("idle", idle)):
        s2.set_sampling(replace(sampling, seed=p.seed))
        s2.load_prompt(p.ids)
        s2.reset_decode_counters()
        _, _, dec, _ = s2.native_loop(tokens, timed=True, sync=False, idle_after_decode=sleep)
        t_eval, n_eval = s2.decode_counters()
        out[name] = 1e3 * (t_eval / n_eval - dec / tokens)
    return out


def bench_decode(s2: LlamaCppS2, prompts: list[str], tokens: int, rounds: int, sampling: SamplingParams
                 ) -> dict:
    fmt = backend_thinking(s2)
    ids = [prompt_ids(s2, prompt_for(s2, q, fmt=fmt, system=system_prompt(fmt, False))) for q in prompts]
    split: dict[str, list[float]] = {"decode": [], "sample": [], "rest": []}
    chosen = choose_seeds(s2, ids, tokens, sampling, split)
    walls: dict[str, list[float]] = {p: [] for p in PATHS}
    cpus: dict[str, list[float]] = {p: [] for p in PATHS}
    t_eval: dict[str, list[float]] = {p: [] for p in PATHS}
    same = {p: True for p in PATHS}
    k = 0
    for _ in range(rounds):
        for p in chosen:
            order = PATHS[k % 3:] + PATHS[: k % 3]
            k += 1
            for path in order:
                wall, cpu, per_token, ok = run_path(s2, path, p, tokens, sampling)
                walls[path].append(wall)
                cpus[path].append(cpu)
                t_eval[path].append(per_token)
                same[path] &= ok
    native = walls["native"]
    mixed, mixed_same = [], True
    for p in chosen:
        r, ok = interleaved(s2, p, tokens, sampling)
        mixed += r
        mixed_same &= ok
    return {
        "interleaved": mixed,
        "interleaved_same": mixed_same,
        "native_token_us": 1e6 * median(native) / tokens,
        "seeds": [p.seed for p in chosen],
        "runs": len(native),
        "tok_s": {p: median([tokens / w for w in walls[p]]) for p in PATHS},
        "share": {p: [n / w for n, w in zip(native, walls[p])] for p in PATHS},
        "extra_us": {p: [1e6 * (w - n) / tokens for n, w in zip(native, walls[p])] for p in PATHS},
        "cpu_share": {p: [n / c for n, c in zip(cpus["native"], cpus[p])] for p in PATHS},
        "cpu_extra_us": {p: [1e6 * (c - n) / tokens for n, c in zip(cpus["native"], cpus[p])] for p in PATHS},
        "t_eval_tok_s": {p: median([1 / t for t in t_eval[p]]) for p in PATHS},
        "same": same,
        "split_us": {name: 1e6 * median(v) for name, v in split.items()},
        "bookkeeping_us": bookkeeping_us(s2, chosen[0].reference),
        "t_eval_check": t_eval_check(s2, chosen[0], sampling),
    }


def print_decode(d: dict, tokens: int) -> None:
    print(f"\ndecode: {d['runs']} runs per path ({len(d['seeds'])} prompts, seeds {d['seeds']}), "
          f"{tokens} tokens each; wall clock around the {tokens} tokens")
    print(f"{'path':<20} {'wall tok/s':>10} {'share of native':>16} {'(quartiles)':>16} "
          f"{'CPU share':>10} {'same tokens':>12} {'t_eval tok/s':>13}")
    for p in PATHS:
        share = d["share"][p]
        lo, hi = quartiles(share)
        print(f"{LABELS[p]:<20} {d['tok_s'][p]:>10.2f} {100 * median(share):>15.2f}% "
              f"{f'{100 * lo:.2f}-{100 * hi:.2f}%':>16} {100 * median(d['cpu_share'][p]):>9.2f}% "
              f"{'yes' if d['same'][p] else 'NO':>12} {d['t_eval_tok_s'][p]:>13.2f}")
    print("  share of native: median over runs of the path's wall tok/s over the native loop's in the same "
          "run (quartiles beside it); tok/s: median over runs; CPU share: the same with the process's CPU "
          "time, which waiting for a busy core does not inflate; t_eval tok/s: llama.cpp's own eval "
          "counter (not native: see below)")
    mixed = d["interleaved"]
    lo, hi = quartiles(mixed)
    print(f"our loop against native in alternating {len(mixed)} pairs of 32-token chunks of one sequence "
          f"(both orders): {100 * median(mixed):.2f}% of native (quartiles {100 * lo:.2f}-{100 * hi:.2f}%), "
          f"same tokens: {'yes' if d['interleaved_same'] else 'NO'}")
    s = d["split_us"]
    warm_us = s["decode"] + s["sample"] + s["rest"]
    token_us = d["native_token_us"]
    print(f"\nper-token cost, microseconds; % of a token of the native loop (the split: of the timed "
          f"warm-up runs' token, {warm_us:.0f} us; the rest: of the measured runs' median, {token_us:.0f} us)")
    for name, us in (
        ("C decode (llama_decode + llama_synchronize)", s["decode"]),
        ("C sampler chain (llama_sampler_sample)", s["sample"]),
        ("native loop's rest (ctypes calls, loop, clock)", s["rest"]),
    ):
        print(f"  {name:<52} {us:>10.1f}  {100 * us / warm_us:>6.2f}%")
    rows = []
    for p in ("ours", "create_completion"):
        rows.append((f"{LABELS[p]} minus native, wall (paired, median)", median(d["extra_us"][p])))
        rows.append((f"{LABELS[p]} minus native, CPU (paired, median)", median(d["cpu_extra_us"][p])))
    b = d["bookkeeping_us"]
    rows += [
        ("our loop's bookkeeping alone, stop text (replay)", b["stop text"]),
        ("our loop's bookkeeping alone, no stop text", b["plain"]),
        ("create_completion's detokenize per token (mean)", b["detokenize half"]),
    ]
    for name, us in rows:
        print(f"  {name:<52} {us:>10.1f}  {100 * us / token_us:>6.2f}%")
    print("  bookkeeping alone: generate() replaying the recorded tokens with no model (pieces, end "
          "check, stop scan, ids; no C call), best of 30; create_completion's detokenize: it decodes "
          "every completion token so far again after each token (one ctypes call a token), timed here "
          f"on {tokens // 2} tokens, the mean length over a run")
    c = d["t_eval_check"]
    print(f"\nllama.cpp's t_eval runs from a decode to the next logits read: in a native run of 32 tokens "
          f"it counts {c['busy']:.3f} ms a token more than the time inside llama_decode; with 2 ms of sleep "
          f"between each decode and the next sample, {c['idle']:.3f} ms more")


def bench_supervised(s2, s1, prompts, tokens, interval, sampling: SamplingParams) -> dict[str, float]:
    monitors = resolve_monitors(["overthinking", "unanswerable"])
    rows = {"vanilla": [], "supervised": []}
    scans, s1_per_scan, loop_per_scan = 0, [], []
    for i, question in enumerate(prompts):
        pair = (("vanilla", None), ("supervised", s1))
        for name, s1_used in pair if i % 2 == 0 else pair[::-1]:  # each goes first equally often
            config = RunConfig(
                takeovers="never",  # never cut the run short: equal work with and without S1
                pause=PauseRule(interval, 128),
                max_tokens=tokens,
                thinking=ThinkingFormat("prompted", close="</never>"),  # think for the whole budget
                sampling=replace(sampling, seed=sampling.seed + i),
            )
            end = supervise(question, s2, s1_used, monitors, config).end
            rows[name].append(end)
            if s1_used is not None and end.scans:
                scans += end.scans
                s1_per_scan.append(end.timings.s1 / end.scans)
                loop_per_scan.append(end.timings.loop / end.scans)
    sup = rows["supervised"]
    wall = sum(e.timings.wall for e in sup)
    return {
        "scans": scans,
        "s1_s_per_scan": statistics.mean(s1_per_scan) if s1_per_scan else float("nan"),
        "loop_ms_per_scan": 1000 * statistics.mean(loop_per_scan) if loop_per_scan else float("nan"),
        "share_s2": sum(e.timings.s2_decode + e.timings.s2_prefill for e in sup) / wall,
        "share_s1": sum(e.timings.s1 for e in sup) / wall,
        "share_loop": sum(e.timings.loop for e in sup) / wall,
        "vanilla_tok_s": sum(e.tokens.thinking + e.tokens.answer for e in rows["vanilla"])
        / sum(e.timings.s2_decode for e in rows["vanilla"]),
        "supervised_tok_s": sum(e.tokens.thinking + e.tokens.answer for e in sup)
        / sum(e.timings.s2_decode for e in sup),
    }


def main() -> None:
    ap = argparse.ArgumentParser(
        prog="python -m benchmarks.s2_speed", description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--model", help="S2 GGUF path or embedded name")
    ap.add_argument("--s1", default="readout", help="S1 spec for the supervised runs ('none' skips them)")
    ap.add_argument("--tokens", type=int, default=256, help="tokens per decode run, the same in every path")
    ap.add_argument("--rounds", type=int, default=3, help="rounds of the decode table (each: every prompt, every path)")
    ap.add_argument("--prompts", type=int, default=2, help=f"prompts (at most {len(PROMPTS)})")
    ap.add_argument("--supervised-tokens", type=int, default=512, help="token budget of a supervised run")
    ap.add_argument("--scan-interval", type=int, default=256)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--n-gpu-layers", type=int, default=0)
    ap.add_argument("--flash-attn", action="store_true")
    ap.add_argument("--n-ctx", type=int, default=4096)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--temperature", type=float, default=0.6)
    ap.add_argument("--top-p", type=float, default=0.95)
    ap.add_argument("--top-k", type=int, default=0, help="20 for Qwen3; 0 (off) is the R1 setting")
    args = ap.parse_args()

    start = time.perf_counter()
    print(f"start: {load_report()}")
    path = resolve_gguf(args.model)
    s2 = LlamaCppS2(path, n_ctx=args.n_ctx, n_threads=args.threads, n_gpu_layers=args.n_gpu_layers,
                    flash_attn=args.flash_attn)
    prompts = PROMPTS[: args.prompts]
    sampling = SamplingParams(args.temperature, args.top_p, args.top_k, 0.0, args.seed)
    print(f"model {path.name} | threads {args.threads} | n_gpu_layers {args.n_gpu_layers} | "
          f"{len(prompts)} prompts x {args.tokens} tokens x {args.rounds} rounds | {sampling}")
    print_decode(bench_decode(s2, prompts, args.tokens, args.rounds, sampling), args.tokens)
    if args.s1 != "none":
        s1 = load_s1(args.s1, n_threads=args.threads, n_gpu_layers=args.n_gpu_layers)
        r = bench_supervised(s2, s1, prompts, args.supervised_tokens, args.scan_interval, sampling)
        print(f"\nsupervised ({s1.name}, 2 monitors, X={args.scan_interval}, {len(prompts)} prompts x "
              f"{args.supervised_tokens} tokens): {r['scans']} scans | "
              f"S1 {r['s1_s_per_scan']:.3f} s/scan | loop {r['loop_ms_per_scan']:.2f} ms/scan | "
              f"wall shares S2 {100 * r['share_s2']:.1f}% S1 {100 * r['share_s1']:.1f}% "
              f"loop {100 * r['share_loop']:.2f}%")
        print(f"S2 decode tok/s vanilla {r['vanilla_tok_s']:.1f} | supervised {r['supervised_tok_s']:.1f}")
        s1.close()
    s2.close()
    print(f"\nend, {time.perf_counter() - start:.0f} s in all: {load_report()}")


if __name__ == "__main__":
    main()
