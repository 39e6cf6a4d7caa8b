"""Draw states for the statement bank and write the batch files its readers label.

    python -m training.states.bank_batches traces --train 1150 --dev 250 --test 300 --double 120
    python -m training.states.bank_batches runs --states 350 --double 30

Each state is judged against ``--per-state`` statements of as many different families, so the
statement, not the state, decides the label: states of ``train`` and ``dev`` questions get trained
families only; states of ``test`` questions get every held-out family and trained ones for the rest.
A statement is a family's wording or (with ``--negation-share``) its negation, drawn at random; with
``--forms`` it takes any of the forms users write (``FORM_MIX``), a test or eval state takes a share of
the held-out families (``--held-out-per-state``) and whole minimal pairs (``--pairs-per-state``), and
``--long-share`` of the states are cut after ``--long-tokens`` thinking tokens (issue 31's draws k, m):

    python -m training.states.bank_batches traces --prefix k --train 1000 --dev 150 --test 50 --per-trace 10 \
        --long-share 0.78 --double 120 --per-state 12 --forms --held-out-per-state 6 --pairs-per-state 2 \
        --unlabelled-weight 2.5 --batch-size 20

States are cut at the engine's scan schedule (``training.states.cuts.scan_cuts``) from the shared traces'
training half (``traces``) or from the embedded S2 runs of ``training.states.s2_runs`` (``runs``, cut with
the run's own S2 tokenizer, at ``--interval``: the demo's 128 gives a small model's short runs more
states). References go to ``training/data/bank_states.jsonl`` (committed, no
text); a reader's batch holds only what the reader may see: the state id, the state text and the
statements under opaque keys (a, b, ...). ``--double`` states are also written to ``D`` batches
for a second, independent reader with the same statements.
"""

from __future__ import annotations

import argparse
import json
import random
import string
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Sequence, get_args

from pydantic import BaseModel, ConfigDict

from soma_local.calibration.recorded import load_all, reserved_questions
from soma_local.data_dir import data_dir
from soma_local.engine.pauses import PauseRule
from soma_local.errors import DataError
from soma_local.s1.cues import window as limit_h
from soma_local.s1.state import format_state, parse_state
from soma_local.s2.model_files import GgufVocab, resolve_gguf
from training.bank.statement_bank import Bank, Family, Split, bank_split, family_of, load_bank
from training.paths import BANK_BATCHES, BANK_LABELS, BANK_STATES, S2_RUNS, shown
from training.states.cuts import scan_cut_points
from training.states.reader_set import gold_state, render_state, short_model, trace_key, training_half, write_jsonl
from training.states.s2_runs import S2Run, read_runs


class BankState(BaseModel):
    """One bank state by reference, and the statements its reader judges (opaque key -> bank key)."""

    model_config = ConfigDict(frozen=True)

    sid: str
    source: Literal["trace", "run"]
    dataset: str
    model: str
    question_id: str
    answerable: bool
    run_id: str | None = None  # source "run": the row of training/data/s2_runs.jsonl
    cut_char: int  # trace: offset into the trace's output; run: offset into the run's thinking
    split: Split
    statements: dict[str, str]
    # A "newest part" state (``halves``): only the newest this many characters of H are shown, cut at a
    # line break, so a reader's label says whether the statement still holds without the older part.
    keep_chars: int | None = None
    of_sid: str | None = None  # the whole state it was cut from


def read_states(path: Path = BANK_STATES) -> list[BankState]:
    if not path.is_file():
        return []
    return [BankState.model_validate_json(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def read_label_keys(path: Path = BANK_LABELS) -> set[str]:
    """The bank keys that have at least one reader label."""
    if not path.is_file():
        return set()
    return {json.loads(line)["key"] for line in path.read_text(encoding="utf-8").splitlines() if line.strip()}


class Texts:
    """Rebuilds state text from references: the shared traces in the data directory and the S2 runs."""

    def __init__(self, root: Path | None = None):
        traces = load_all(root or data_dir())
        self.traces = {trace_key(t.dataset, t.model, t.question_id): t for t in traces}
        self.questions = {t.question_id: t.question for t in traces}
        self.runs = {r.run_id: r for r in read_runs()}

    def state(self, ref: BankState) -> str:
        text = self._whole(ref)
        if ref.keep_chars is None:
            return text
        task, reasoning = parse_state(text)
        return format_state(task, limit_h(reasoning, ref.keep_chars))

    def _whole(self, ref: BankState) -> str:
        if ref.source == "trace":
            trace = self.traces.get(trace_key(ref.dataset, ref.model, ref.question_id))
            if trace is None:
                raise DataError(f"{ref.sid}: no trace {ref.dataset}/{ref.model}/{ref.question_id} in the data directory")
            return render_state(trace, ref.cut_char)
        run = self.runs.get(ref.run_id or "")
        if run is None:
            raise DataError(f"{ref.sid}: no run {ref.run_id} in {shown(S2_RUNS)}")
        return gold_state(self.questions[run.question_id], run.thinking[: ref.cut_char])


# The forms a drawn family's statement takes in a ``--forms`` draw (issue 31): wordings most, then what
# users also write; a family without a contrast gives a wording instead.
FORM_MIX: tuple[tuple[str, float], ...] = (("wording", 0.40), ("negation", 0.20), ("question", 0.15),
                                           ("instruction", 0.10), ("label", 0.10), ("contrast", 0.05))


@dataclass(frozen=True)
class Mix:
    """What goes on a state besides its trained families. The defaults are the first draws' rule: a
    wording or its negation, every held-out family on a test state, no minimal pair."""

    forms: bool = False  # draw each family's form by FORM_MIX
    held_out: int | None = None  # held-out families drawn per test or eval state (None: all of them)
    pairs: int = 0  # minimal pairs per test or eval state, both statements on the state
    weights: dict[str, float] = field(default_factory=dict)  # trained family -> draw weight (1 if absent)


def draw_key(family: Family, rng: random.Random, negation_share: float, forms: bool) -> str:
    if forms:
        form = rng.choices([f for f, _ in FORM_MIX], [w for _, w in FORM_MIX])[0]
        if form == "contrast" and family.contrast is None:
            form = "wording"
        if form not in ("wording", "negation"):
            return f"{family.id}.{form}"
        return f"{family.id}.{rng.randrange(len(family.wordings))}" + (".not" if form == "negation" else "")
    i = rng.randrange(len(family.wordings))
    return f"{family.id}.{i}" + (".not" if rng.random() < negation_share else "")


def choose_statements(bank: Bank, split: Split, rng: random.Random, per_state: int, negation_share: float,
                      only: frozenset[str] | None = None, mix: Mix = Mix()) -> dict[str, str]:
    """``per_state`` statements from as many families: on a test or eval state the held-out families
    (all, or ``mix.held_out`` of them) and ``mix.pairs`` minimal pairs, then trained families drawn from
    ``only`` where given (a draw for newly added families), by ``mix.weights``."""
    test = split in ("test", "eval")
    held = list(bank.held_out) if test else []
    if test and mix.held_out is not None:
        held = rng.sample(held, min(mix.held_out, len(held)))
    if len(held) > per_state:  # the bank of issue 31 holds 14: its draw takes a share of them per state
        raise DataError(f"{per_state} statements per state cannot hold all {len(held)} held-out families; "
                        "draw a share of them per state (--held-out-per-state)")
    used = {f.id for f in held}
    fixed: list[str] = []
    if test and mix.pairs:
        for pair in rng.sample(bank.minimal_pair, len(bank.minimal_pair)):
            families = {family_of(pair.a), family_of(pair.b)}
            if len(fixed) < 2 * mix.pairs and not families & used and len(held) + len(fixed) + 2 <= per_state:
                fixed += [pair.a, pair.b]
                used |= families
    pool = [f for f in bank.trained if (only is None or f.id in only) and f.id not in used]
    want = per_state - len(held) - len(fixed)
    if len(pool) < want:
        raise DataError(f"{per_state} statements per state need {want} trained families; {len(pool)} to draw from")
    if mix.weights:
        pool.sort(key=lambda f: -(rng.random() ** (1.0 / mix.weights.get(f.id, 1.0))))
        drawn = pool[:want]
    else:
        drawn = rng.sample(pool, want)
    keys = fixed + [draw_key(f, rng, negation_share, mix.forms) for f in held + drawn]
    rng.shuffle(keys)
    return dict(zip(string.ascii_lowercase, keys))


def _draw(candidates: Sequence[tuple], targets: dict[Split, int], rng: random.Random, per_trace: int,
          long_share: float = 0.0, long_tokens: int = 1000) -> list[tuple]:
    """Up to ``per_trace`` cuts of each trace, then ``targets[split]`` states per split. A candidate's
    cuts are (character offset, thinking tokens); with ``long_share``, that share of each split's states
    is cut after ``long_tokens`` or more (each trace gives up to ``per_trace`` short and long cuts)."""
    by_split: dict[Split, tuple[list, list]] = defaultdict(lambda: ([], []))
    for item in candidates:
        *head, cuts, split = item
        groups = [[c for c in cuts if c[1] < long_tokens], [c for c in cuts if c[1] >= long_tokens]] if long_share else [cuts]
        for side, group in enumerate(groups):
            for cut, _ in rng.sample(group, min(per_trace, len(group))):
                by_split[split][side].append((*head, cut, split))
    out = []
    for split, n in targets.items():
        n_long = round(n * long_share)
        for side, (pool, k) in enumerate(zip(by_split[split], (n - n_long, n_long))):
            if len(pool) < k:
                kind = ("long " if side else "short ") if long_share else ""
                raise DataError(f"{split}: only {len(pool)} {kind}cuts to draw from, {k} wanted")
            out += rng.sample(pool, k)
    rng.shuffle(out)
    return out


def trace_states(targets: dict[Split, int], per_trace: int, rng: random.Random, taken: set[tuple] = frozenset(),
                 long_share: float = 0.0, long_tokens: int = 1000) -> list[dict]:
    """States of the training half's questions by their split, or (``eval``) of the other half's; never
    a cut in ``taken`` ((dataset, model, question, cut_char) of states already in the bank)."""
    root = data_dir()
    traces = load_all(root)
    train = training_half((t.dataset, t.answerable, t.question_id) for t in traces)
    reserved = reserved_questions(root)
    vocab = GgufVocab.from_path(resolve_gguf(None))
    candidates = []
    for t in traces:
        split = bank_split(t.question_id) if t.question_id in train else "eval"
        if t.question_id not in reserved and split in targets:
            model = short_model(t.model)
            cuts = [(c, n) for c, n in scan_cut_points(t.thinking, vocab) if t.thinking[:c].strip()
                    and (t.dataset, model, t.question_id, t.thinking_start + c) not in taken]
            candidates.append((t, cuts, split))
    return [dict(source="trace", dataset=t.dataset, model=short_model(t.model), question_id=t.question_id,
                 answerable=t.answerable, cut_char=t.thinking_start + cut, split=split)
            for t, cut, split in _draw(candidates, targets, rng, per_trace, long_share, long_tokens)]


def run_states(total: int, per_trace: int, rng: random.Random, rule: PauseRule, taken: set[tuple] = frozenset()) -> list[dict]:
    runs: list[S2Run] = read_runs()
    if not runs:
        raise DataError("no embedded S2 runs yet: run python -m training.states.s2_runs first")
    vocabs = {m: GgufVocab.from_path(resolve_gguf(m)) for m in {r.s2_model for r in runs}}
    candidates = []
    for r in runs:
        cuts = [(c, n) for c, n in scan_cut_points(r.thinking, vocabs[r.s2_model], rule) if r.thinking[:c].strip()
                and (r.run_id, c) not in taken]
        candidates.append((r, cuts, bank_split(r.question_id)))
    # Each split takes its share of the cuts there are (at most ``per_trace`` of a run), up to ``total`` in all.
    pool = {s: sum(min(per_trace, len(cuts)) for _, cuts, sp in candidates if sp == s) for s in ("train", "dev", "test")}
    scale = min(1.0, total / max(1, sum(pool.values())))
    targets: dict[Split, int] = {s: int(n * scale) for s, n in pool.items()}
    return [dict(source="run", dataset=r.dataset, model=r.s2_model, question_id=r.question_id,
                 answerable=r.answerable, run_id=r.run_id, cut_char=cut, split=split)
            for r, cut, split in _draw(candidates, targets, rng, per_trace)]


def draw_statements(drawn: list[dict], bank: Bank, rng: random.Random, args, only: frozenset[str] | None,
                    prefix: str) -> list[BankState]:
    labelled = {family_of(key) for key in read_label_keys()}
    weights = {f.id: args.unlabelled_weight for f in bank.trained if f.id not in labelled} if args.unlabelled_weight != 1 else {}
    mix = Mix(forms=args.forms, held_out=args.held_out_per_state, pairs=args.pairs_per_state, weights=weights)
    return [BankState(sid=f"{prefix}{i:05d}", statements=choose_statements(bank, d["split"], rng, args.per_state,
                                                                             args.negation_share, only, mix), **d)
            for i, d in enumerate(drawn)]


def halves(existing: Sequence[BankState], of: set[str], splits: set[str], min_tokens: int, n: int, prefix: str,
           rng: random.Random) -> list[BankState]:
    """``n`` long states of the draws ``of`` and ``splits`` (H of ``min_tokens`` thinking tokens or more), each
    as its newest half: the same reference and statements, only the newest half of H's characters shown.
    Where a reader finds a statement holding on the whole state but not on its newest half, its evidence
    sits only in the older half: what a reader of the newest window alone cannot see. On test and eval
    states that is a measure (``benchmarks/s1_early_evidence.py``); on train and dev states the two labels
    side by side teach a whole-state S1 where the evidence sits."""
    texts = Texts()
    vocab = GgufVocab.from_path(resolve_gguf(None))
    long = []
    for s in existing:
        if s.sid[0] in of and s.split in splits and s.keep_chars is None:
            reasoning = parse_state(texts.state(s))[1]
            if len(vocab.pieces(reasoning)) >= min_tokens:
                long.append((s, len(reasoning) // 2))
    if len(long) < n:
        raise DataError(f"only {len(long)} {'/'.join(sorted(splits))} states of draws {''.join(sorted(of))} hold {min_tokens} tokens; "
                        f"{n} wanted")
    return [s.model_copy(update={"sid": f"{prefix}{i:05d}", "keep_chars": keep, "of_sid": s.sid})
            for i, (s, keep) in enumerate(rng.sample(long, n))]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m training.states.bank_batches", description=__doc__.split("\n\n")[0])
    ap.add_argument("source", choices=["traces", "runs", "eval", "halves"],
                    help="traces: the training half; runs: the embedded S2 runs; eval: the other half, for measuring only; "
                         "halves: the newest half of long states already drawn (--splits), with their statements")
    ap.add_argument("--of", default="m", help="halves: the draws (letters) whose long states are halved")
    ap.add_argument("--splits", default="test,eval", help="halves: the splits whose long states are halved (comma-separated)")
    ap.add_argument("--min-tokens", type=int, default=1000, help="halves: thinking tokens (SmolLM2's) a state's H must hold")
    ap.add_argument("--train", type=int, default=1150, help="traces: states of train questions")
    ap.add_argument("--dev", type=int, default=250, help="traces: states of dev questions")
    ap.add_argument("--test", type=int, default=300, help="traces: states of test questions")
    ap.add_argument("--states", type=int, default=350, help="runs, eval: states in all")
    ap.add_argument("--per-trace", type=int, default=3, help="at most this many cuts of one trace or run")
    ap.add_argument("--interval", type=int, default=256,
                    help="runs: the scan interval they are cut at (the demo scans every 128 tokens)")
    ap.add_argument("--per-state", type=int, default=8, help="statements judged on each state")
    ap.add_argument("--negation-share", type=float, default=0.15)
    ap.add_argument("--double", type=int, default=120, help="states labelled twice")
    ap.add_argument("--batch-size", type=int, default=40)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--prefix", help="the draw's letter for state ids and batches (default: g traces, e runs, v eval); "
                                     "a later draw over the same source takes a new one")
    ap.add_argument("--forms", action="store_true",
                    help="draw each statement's form (wording, negation, question, instruction, label, contrast) by FORM_MIX")
    ap.add_argument("--held-out-per-state", type=int, help="held-out families drawn per test or eval state (default: all)")
    ap.add_argument("--pairs-per-state", type=int, default=0, help="minimal pairs (both statements) per test or eval state")
    ap.add_argument("--long-share", type=float, default=0.0, help="traces, eval: share of states cut after --long-tokens")
    ap.add_argument("--long-tokens", type=int, default=1000, help="thinking tokens (SmolLM2's) before a long state's cut")
    ap.add_argument("--unlabelled-weight", type=float, default=1.0,
                    help="draw weight of trained families with no label in bank_labels.jsonl yet (others: 1)")
    ap.add_argument("--families", help="comma-separated trained families to draw statements from (default: all); "
                                       "held-out families always go on test and eval states")
    args = ap.parse_args(argv)

    bank = load_bank()
    prefix = args.prefix or {"traces": "g", "runs": "e", "eval": "v"}[args.source]
    if len(prefix) != 1 or not prefix.islower() or prefix in "dr":
        raise DataError(f"--prefix must be one lower-case letter other than d (doubles) and r (reader_states.jsonl), "
                        f"not {prefix!r}")
    only = frozenset(args.families.split(",")) if args.families else None
    if only and only - {f.id for f in bank.trained}:
        raise DataError(f"--families: not trained families of the bank: {', '.join(sorted(only - {f.id for f in bank.trained}))}")
    existing = read_states()
    if any(s.sid.startswith(prefix) for s in existing):
        raise DataError(f"{shown(BANK_STATES)} already has states {prefix}*; choose another --prefix, or delete them to draw again")
    rng = random.Random(f"{args.seed}:{args.source}" + (f":{prefix}" if args.prefix else ""))
    if args.source == "halves":
        splits = set(args.splits.split(","))
        if unknown := splits - set(get_args(Split)):
            raise DataError(f"--splits: not splits: {', '.join(sorted(unknown))} (splits: {', '.join(get_args(Split))})")
        states = halves(existing, set(args.of), splits, args.min_tokens, args.states, prefix, rng)
    else:
        if args.source == "runs":
            taken = {(s.run_id, s.cut_char) for s in existing if s.source == "run"}
            drawn = run_states(args.states, args.per_trace, rng, PauseRule(args.interval), taken)
        else:
            targets = {"train": args.train, "dev": args.dev, "test": args.test} if args.source == "traces" else {"eval": args.states}
            taken = {(s.dataset, s.model, s.question_id, s.cut_char) for s in existing if s.source == "trace"}
            drawn = trace_states(targets, args.per_trace, rng, taken, args.long_share, args.long_tokens)
        states = draw_statements(drawn, bank, rng, args, only, prefix)
    write_jsonl(BANK_STATES, (s.model_dump(exclude_none=True) for s in [*existing, *states]))
    texts = Texts()

    def row(s: BankState) -> dict:
        return {"sid": s.sid, "state": texts.state(s),
                "statements": {k: bank.statement(v) for k, v in s.statements.items()}}

    BANK_BATCHES.mkdir(parents=True, exist_ok=True)
    letter = prefix.upper()
    batches = [states[i : i + args.batch_size] for i in range(0, len(states), args.batch_size)]
    for n, batch in enumerate(batches, 1):
        write_jsonl(BANK_BATCHES / f"{letter}{n:03d}.jsonl", (row(s) for s in batch))
    doubles = random.Random(f"{args.seed}:double").sample(states, min(args.double, len(states)))
    for n in range(0, len(doubles), args.batch_size):
        write_jsonl(BANK_BATCHES / f"D{letter}{n // args.batch_size + 1:03d}.jsonl",
                    (row(s) for s in doubles[n : n + args.batch_size]))
    pairs = sum(len(s.statements) for s in states)
    print(f"{len(states)} states, {pairs} (state, statement) pairs -> {shown(BANK_STATES)}; "
          f"{len(batches)} batches {letter}* and doubles D{letter}* in {shown(BANK_BATCHES)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
