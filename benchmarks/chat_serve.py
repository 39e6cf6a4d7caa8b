"""The chat endpoint's overhead: one question, same seed, through ``soma serve-chat`` (streamed, the official
``openai`` client, real loopback sockets) and directly through the same ``Supervisor`` in the same
process, alternating which goes first each round so drift on a shared machine falls on both alike.

Prints per round and overall: generated tokens, tokens per second (generated tokens over the wall time
of the request, or of ``Supervisor.run``), the endpoint/direct ratio, and the time to the first
reasoning token (the first ``reasoning_content`` delta; directly, the first thinking ``Piece``). The
load average before and after says what else the machine was doing; absolute figures on a shared
machine are noise, the ratio is the figure.

  .venv/bin/python -m benchmarks.chat_serve                       # embedded SmolLM2, 3 rounds of 256 tokens
  .venv/bin/python -m benchmarks.chat_serve --rounds 5 --max-tokens 512 --s2-model M.gguf
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from dataclasses import dataclass

import openai

from soma_local.serve.app import Running
from soma_local.serve.chat import create_chat_app
from soma_local.supervisor import Piece, Supervisor

QUESTION = ("A train leaves at 9:40 and arrives at 13:15 after two stops of 12 minutes each. How long was it "
            "moving? Show all the steps.")


@dataclass
class Timed:
    tokens: int
    wall: float
    first: float  # seconds to the first reasoning token

    @property
    def rate(self) -> float:
        return self.tokens / self.wall


def direct(sup: Supervisor, args) -> Timed:
    first: list[float] = []
    t0 = time.perf_counter()

    def hear(event: object) -> None:
        if not first and isinstance(event, Piece) and event.section == "thinking":
            first.append(time.perf_counter() - t0)

    run = sup.run(args.question, seed=args.seed, max_tokens=args.max_tokens, on_event=hear)
    return Timed(run.tokens.thinking + run.tokens.answer, time.perf_counter() - t0, first[0] if first else float("nan"))


def endpoint(client: openai.OpenAI, model: str, args) -> Timed:
    first = None
    t0 = time.perf_counter()
    stream = client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": args.question}], seed=args.seed,
        max_tokens=args.max_tokens, stream=True, stream_options={"include_usage": True})
    tokens = 0
    for chunk in stream:
        if first is None and chunk.choices and (chunk.choices[0].delta.model_extra or {}).get("reasoning_content"):
            first = time.perf_counter() - t0
        if chunk.usage is not None:
            tokens = chunk.usage.completion_tokens
    return Timed(tokens, time.perf_counter() - t0, first if first is not None else float("nan"))


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m benchmarks.chat_serve", description=__doc__.split("\n\n")[0])
    p.add_argument("--question", default=QUESTION)
    p.add_argument("--s2-model", default="smollm2-135m", help="GGUF path or embedded name")
    p.add_argument("--monitor", action="append", help="monitor, repeatable (default: overthinking, looping)")
    p.add_argument("--max-tokens", type=int, default=256)
    p.add_argument("--rounds", type=int, default=3, help="pairs of runs (endpoint, direct), order alternating")
    p.add_argument("--seed", type=int, default=11)
    p.add_argument("--threads", type=int, help="S2 and S1 threads (default: the engine's)")
    args = p.parse_args(argv)

    load_before = os.getloadavg()
    options = {"threads": args.threads} if args.threads else {}
    with Supervisor(args.s2_model, monitors=args.monitor or ["overthinking", "looping"], **options) as sup, \
            Running(create_chat_app(sup)) as srv:
        client = openai.OpenAI(base_url=f"{srv.url}/v1", api_key="unused", max_retries=0, timeout=600)
        sup.run(args.question, seed=args.seed, max_tokens=16)  # warm-up: first decode and scan cost extra
        pairs = []
        for i in range(args.rounds):
            order = ("endpoint", "direct") if i % 2 == 0 else ("direct", "endpoint")
            got = {name: endpoint(client, sup.s2_name, args) if name == "endpoint" else direct(sup, args) for name in order}
            pairs.append(got)
            e, d = got["endpoint"], got["direct"]
            print(f"round {i + 1} ({order[0]} first): endpoint {e.tokens} tok {e.rate:6.1f} tok/s ttft {e.first:5.2f} s | "
                  f"direct {d.tokens} tok {d.rate:6.1f} tok/s ttft {d.first:5.2f} s | ratio {e.rate / d.rate:.3f}", flush=True)
    ratios = [g["endpoint"].rate / g["direct"].rate for g in pairs]
    print(f"S2 {sup.s2_name}, S1 {sup.s1_name}, monitors {', '.join(sup.monitor_names)}, {args.max_tokens} max tokens, "
          f"{args.rounds} rounds, {os.cpu_count()} CPUs")
    print(f"tokens/s endpoint/direct: median {statistics.median(ratios):.3f} (rounds: {', '.join(f'{r:.3f}' for r in ratios)})")
    for name in ("endpoint", "direct"):
        firsts = [g[name].first for g in pairs]
        print(f"time to first reasoning token, {name}: median {statistics.median(firsts):.3f} s")
    load_after = os.getloadavg()
    print(f"load average (1/5/15 min) before {' '.join(f'{x:.1f}' for x in load_before)}, "
          f"after {' '.join(f'{x:.1f}' for x in load_after)}")


if __name__ == "__main__":
    main()
