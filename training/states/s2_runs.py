"""Reasoning of the embedded S2 models, for S1 training states: the loops and drift a CPU user sees.

    python -m training.states.s2_runs --s2-model smollm2-135m --runs 60
    python -m training.states.s2_runs --s2-model qwen2.5-0.5b --runs 30

Each run is a plain (unsupervised) ``supervise`` run of an embedded S2 on one question of the shared
traces' training half (never a reserved question), prompted with the instruction the traces' prompts
begin with (``calibration.recorded.BASE_INSTRUCTION``), without Liu et al.'s abstention sentences. Only references and
the S2's own thinking are stored (``training/data/s2_runs.jsonl``): the question text is rebuilt from
the data directory. The file grows run by run, so an interrupted call resumes.
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from soma_local.calibration.recorded import BASE_INSTRUCTION, load_all, reserved_questions
from soma_local.data_dir import data_dir
from soma_local.engine.supervise import RunConfig, supervise
from soma_local.s2.base import SamplingParams
from soma_local.s2.build import S2Options, build_s2
from training.paths import S2_RUNS
from training.states.reader_set import training_half



class S2Run(BaseModel):
    """One embedded-S2 run by reference: the question by id, S2's own thinking verbatim."""

    model_config = ConfigDict(frozen=True)

    run_id: str
    s2_model: str
    dataset: str
    question_id: str
    answerable: bool
    seed: int
    max_tokens: int
    stop: str
    thinking_tokens: int
    thinking: str


def read_runs(path: Path = S2_RUNS) -> list[S2Run]:
    if not path.is_file():
        return []
    return [S2Run.model_validate_json(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m training.states.s2_runs", description=__doc__.split("\n\n")[0])
    ap.add_argument("--s2-model", default="smollm2-135m")
    ap.add_argument("--runs", type=int, default=60, help="runs of this S2 in the file when done")
    ap.add_argument("--max-tokens", type=int, default=2048)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--seed", type=int, default=0, help="question draw and first sampling seed")
    args = ap.parse_args(argv)

    root = data_dir()
    traces = load_all(root)
    train = training_half((t.dataset, t.answerable, t.question_id) for t in traces)
    reserved = reserved_questions(root)
    pool = {t.question_id: t for t in traces if t.question_id in train and t.question_id not in reserved}
    order = sorted(pool)
    random.Random(f"{args.seed}:{args.s2_model}").shuffle(order)
    done = {r.run_id for r in read_runs()}
    s2 = build_s2(S2Options(s2_model=args.s2_model, n_ctx=args.max_tokens + 1024, threads=args.threads))
    made = sum(1 for r in read_runs() if r.s2_model == args.s2_model)
    for i, qid in enumerate(order):
        if made >= args.runs:
            break
        run_id = f"{args.s2_model}:{qid}:{args.seed + i}"
        if run_id in done:
            continue
        trace = pool[qid]
        config = RunConfig(max_tokens=args.max_tokens, sampling=SamplingParams(seed=args.seed + i))
        result = supervise(trace.question + BASE_INSTRUCTION, s2, None, [], config)
        row = S2Run(run_id=run_id, s2_model=args.s2_model, dataset=trace.dataset, question_id=qid,
                    answerable=trace.answerable, seed=args.seed + i, max_tokens=args.max_tokens,
                    stop=result.stop, thinking_tokens=result.end.tokens.thinking, thinking=result.thinking)
        S2_RUNS.parent.mkdir(parents=True, exist_ok=True)
        with S2_RUNS.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(row.model_dump(), ensure_ascii=False) + "\n")
        made += 1
        print(f"{made}/{args.runs} {run_id}: {row.thinking_tokens} thinking tokens, stop {row.stop}", flush=True)
    s2.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
