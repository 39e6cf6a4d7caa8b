"""Train the statement-reading S1: one cross-encoder that judges any statement about a reasoning state.

    python -m training.s1.statement_reader --name minilm-statements                 # train, fit T, measure, ship
    python -m training.s1.statement_reader --name minilm-statements --measure-only  # measure the folder as it ships

Data (``training.labels.pairs``): every reader-labelled (state, statement) pair of the statement bank's
``train`` questions in families that are not held out, plus the paper monitors' reader labels; each
epoch a share of the pairs is shown in another wording of its family or as its negation (label 1 - p),
so the model learns that wordings agree and negations flip. T is fitted on ``dev`` pairs of trained
families. Held-out families, the ``test`` and ``eval`` splits and gold are measured only.

Cost on two CPU cores is the encoder's forward and backward passes, so the loop does as little else as
it can: every state is tokenised once (per input length) and batches are assembled from token ids;
batches group pairs of similar length and pad to their own longest; bfloat16 autocast where the CPU
has it natively (``--precision``); the word embeddings stay frozen (half of MiniLM's weights, and the
optimiser's work on them); early epochs may read shorter states (``--short-epochs``). Each log line
prints seconds per labelled pair. Checkpoints every ``--checkpoint-every`` steps under
``training/runs/NAME/``: rerunning the same command resumes there.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import torch

from soma_local.data_dir import data_dir
from soma_local.errors import ModelFileError
from soma_local.s1.classifier import PRECISIONS, ClassifierS1, PairEncoder, ScoreHead, SharedStateEncoder
from soma_local.s1.model_folders import (CARD_FILE, ENCODER_WEIGHTS_FILE, S1_MODELS_DIR, S1ModelConfig, read_config,
                                  read_encoder_weights, read_trained_questions, read_weights, resolve_backbone,
                                  resolve_s1_model, write_model, write_trained_questions)
from soma_local.s1.state import build_state, longest_tokens
from soma_local.s1.temperature import fit_temperature, scaled_probs
from training.bank import evaluate as bank_eval
from training.bank.statement_bank import Bank, load_bank
from training.labels.examples import Example, read_labelled
from training.labels.pairs import PAPER_MONITORS, Pair, all_pairs, reworded, trainable, whole_states
from training.paths import REPO, RUNS, gold_dev
from training.s1.card import statement_card
from training.s1.cue_heads import fit_cue_head
from training.s1.fit import FitSettings, fine_tune



class StateTokens:
    """Each state's token ids at an input length, computed once: the state builder cuts the oldest
    reasoning exactly as serving does, with the room the encoder keeps for the longest statement."""

    def __init__(self, encoder: PairEncoder, statements: Sequence[str]) -> None:
        self.encoder = encoder
        self.reserve = encoder.reserve(longest_tokens(list(statements), encoder.counter))
        self._states: dict[tuple[str, int], tuple[str, list[int]]] = {}
        self._statements: dict[str, list[int]] = {}

    def state(self, pair: Pair, length: int) -> list[int]:
        return self._state(pair, length)[1]

    def state_text(self, pair: Pair, length: int) -> str:
        return self._state(pair, length)[0]

    def _state(self, pair: Pair, length: int) -> tuple[str, list[int]]:
        key = (pair.sid, length)
        if key not in self._states:
            text = build_state(pair.task, pair.reasoning, self.encoder.counter, length, self.reserve)
            self._states[key] = (text, self.encoder.counter.encode(text))
        return self._states[key]

    def batch(self, step: list[tuple[Pair, list[tuple[str, float]]]], length: int):
        """The model inputs of one step: states packed with their statements from token ids (shared
        reading), or (statement, state) text pairs through the tokenizer (pair reading)."""
        if isinstance(self.encoder, SharedStateEncoder):
            return self.encoder.pack_ids([(self.state(p, length), [self.statement(s) for s, _ in st]) for p, st in step])
        return self.encoder.tokenize([(s, self.state_text(p, length)) for p, st in step for s, _ in st])

    def statement(self, text: str) -> list[int]:
        if text not in self._statements:
            self._statements[text] = self.encoder.counter.encode(text)
        return self._statements[text]


Step = tuple[int, list[tuple[Pair, list[tuple[str, float]]]]]  # (input length, [(state, [(statement, label)])])


def plan_epochs(pairs: Sequence[Pair], bank: Bank, length_of: Callable[[Pair, int], int], args) -> list[Step]:
    """One entry per step, fixed by the seed: states of similar length (``length_of(pair, input
    length)``), each with every statement labelled on it (a share reworded, negated or put in another
    form anew each epoch), about ``--batch-size`` pairs a step. Paper states carry one statement each, so
    only ``--paper-per-epoch`` of them join an epoch."""
    by_state: dict[str, list[Pair]] = {}
    for p in pairs:
        by_state.setdefault(p.sid, []).append(p)
    bank_states = [g for g in by_state.values() if g[0].source != "paper"]
    paper_states = [g for g in by_state.values() if g[0].source == "paper"]
    plan: list[Step] = []
    for epoch in range(args.epochs):
        rng = random.Random(f"{args.seed}:{epoch}")
        length = args.short_length if epoch < args.short_epochs else args.max_length
        chosen = bank_states + rng.sample(paper_states, min(args.paper_per_epoch, len(paper_states)))
        units = []
        for group in chosen:
            shown = [reworded(p, bank, rng, args.reword_share, args.negation_share, getattr(args, "form_share", 0.0))
                     for p in group]
            units.append((length_of(group[0], length) + rng.random() * 24, group[0], [(q.statement, q.p) for q in shown]))
        units.sort(key=lambda u: u[0])
        steps, current, size = [], [], 0
        for _, state, statements in units:
            current.append((state, statements))
            size += len(statements)
            if size >= args.batch_size:
                steps.append(current)
                current, size = [], 0
        if current:
            steps.append(current)
        rng.shuffle(steps)
        plan += [(length, step) for step in steps]
    return plan


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m training.s1.statement_reader", description=__doc__.split("\n\n")[0])
    ap.add_argument("--name", default="minilm-statements", help="folder name under s1_models/")
    ap.add_argument("--backbone", default="all-minilm-l6-v2", help="embedded backbone name or local HF folder")
    ap.add_argument("--init", default="minilm-reader",
                    help="an S1 folder whose fine-tuned encoder and head to start from, or 'none' for the published backbone")
    ap.add_argument("--max-length", type=int, default=384, help="input limit in backbone tokens (training and serving)")
    ap.add_argument("--short-length", type=int, default=256, help="input limit of the first --short-epochs epochs")
    ap.add_argument("--short-epochs", type=int, default=1)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--reading", choices=["shared", "pair"], default="shared",
                    help="shared: a state is read once and each statement attends to it; pair: one pass per (statement, state)")
    ap.add_argument("--batch-size", type=int, default=16, help="labelled pairs per step (whole states: a few more)")
    ap.add_argument("--paper-per-epoch", type=int, default=1200,
                    help="paper-monitor states (one statement each) drawn into each epoch")
    ap.add_argument("--lr", type=float, default=5e-5, help="encoder learning rate")
    ap.add_argument("--head-lr", type=float, default=1e-3)
    ap.add_argument("--weight-decay", type=float, default=0.01)
    ap.add_argument("--reword-share", type=float, default=0.5, help="share of pairs shown in a random wording of their family")
    ap.add_argument("--negation-share", type=float, default=0.3, help="share of those shown as the negation (label 1 - p)")
    ap.add_argument("--train-embeddings", dest="freeze_embeddings", action="store_false",
                    help="train the word embeddings too (frozen by default)")
    ap.add_argument("--limit", type=int, default=0, help="train on the first N pairs only (a quick check)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--log-every", type=int, default=20)
    ap.add_argument("--checkpoint-every", type=int, default=50)
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default: all cores)")
    ap.add_argument("--precision", choices=PRECISIONS, default=None, help="as soma's SOMA_S1_PRECISION (default auto)")
    ap.add_argument("--device", default=None, help="cpu | cuda | auto (default; SOMA_S1_DEVICE)")
    ap.add_argument("--out", type=Path, default=S1_MODELS_DIR, help="where released S1s live")
    ap.add_argument("--measure-only", action="store_true", help="measure s1_models/NAME as it ships; train nothing")
    ap.add_argument("--refit", action="store_true",
                    help="keep s1_models/NAME's encoder and head; fit T (and cue heads) again and measure")
    ap.add_argument("--from-checkpoint", type=Path,
                    help="a training checkpoint (training/runs/NAME/checkpoint-*.pt) to ship as it is, with the run's "
                         "--reading and --max-length: for a run stopped before its end")
    ap.add_argument("--no-cue-heads", dest="cue_heads", action="store_false",
                    help="ship no cue heads for the paper monitors (by default they are fitted over the encoder)")
    ap.add_argument("--state-limit", type=int, default=2048,
                    help="tokens of S1 state the cue heads read (the encoder reads the newest --max-length)")
    ap.add_argument("--speed-test", type=int, default=0, metavar="STEPS",
                    help="run this many training steps from the init, print seconds per pair, save nothing")
    ap.add_argument("--eval-limit", type=int, default=0, help="measure on the first N states of each set (0 = all)")
    return ap.parse_args(argv)


def checkpoint_name(args, n_pairs: int) -> str:
    """A checkpoint resumes only the run it came from: the settings that shape the plan are in its name."""
    keys = ("backbone", "init", "reading", "max_length", "short_length", "short_epochs", "epochs", "batch_size", "lr",
            "head_lr", "weight_decay", "reword_share", "negation_share", "freeze_embeddings", "paper_per_epoch", "seed")
    digest = hashlib.sha256(json.dumps([n_pairs, *(getattr(args, k) for k in keys)]).encode()).hexdigest()[:12]
    return f"checkpoint-{digest}.pt"


def without_option(argv: Sequence[str], option: str) -> list[str]:
    """``argv`` less ``option`` and its value: the command that trains what the option shipped."""
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
        elif a == option:
            skip = True
        elif not a.startswith(option + "="):
            out.append(a)
    return out


def init_weights(args) -> tuple[dict | None, dict | None, frozenset[str]]:
    """(encoder weights, head weights, trained questions) of ``--init``, or nothing for the published backbone."""
    if args.init == "none":
        return None, None, frozenset()
    folder = resolve_s1_model(args.init)
    config = read_config(folder)
    if not config.encoder_weights or config.backbone != args.backbone or config.head_hidden != 0:
        raise ModelFileError(f"{folder}: --init needs a fine-tuned S1 of backbone '{args.backbone}' with a linear head")
    return read_encoder_weights(folder, config), read_weights(folder), read_trained_questions(folder)


def measure(folder: Path, pairs: Sequence[Pair], bank: Bank, args) -> dict:
    """The shipped folder's figures on test and eval pairs, negation agreement on eval, and gold."""
    s1 = ClassifierS1(folder, device=args.device, precision=args.precision)
    out: dict = {}
    pairs = whole_states(pairs)
    for split in ("test", "eval"):
        chosen = limit_states([p for p in pairs if p.split == split], args.eval_limit)
        if split == "eval":
            p, negation, wording = bank_eval.consistency(s1, chosen, bank, progress=split)
            out[split] = bank_eval.figures(chosen, p, bank) | {"negation": negation, "wording": wording}
        else:
            out[split] = bank_eval.figures(chosen, bank_eval.score(s1, chosen, progress=split), bank)
    gold = gold_pairs()
    if gold:
        out["gold_dev"] = bank_eval.figures(gold, bank_eval.score(s1, gold, progress="gold"), bank)
    s1.close()
    return out


def limit_states(pairs: Sequence[Pair], n: int) -> list[Pair]:
    """The pairs of ``n`` states spread evenly over the set's states in id order (every draw is in it)."""
    sids = sorted({p.sid for p in pairs})
    if not n or n >= len(sids):
        return list(pairs)
    keep = {sids[i * len(sids) // n] for i in range(n)}
    return [p for p in pairs if p.sid in keep]


def labelled_pairs(bank: Bank, limit: int = 0) -> tuple[list[Pair], list[Pair], list[Pair]]:
    """Every labelled pair, and the ``train`` and ``dev`` pairs of trained families (the first ``limit``
    train pairs where given), with a line saying how many of each split there are."""
    t0 = time.perf_counter()
    pairs = all_pairs(bank)
    train_pairs, dev_pairs = trainable(pairs, bank, "train"), trainable(pairs, bank, "dev")
    if limit:
        train_pairs = train_pairs[:limit]
    print(f"pairs: {len(train_pairs)} train, {len(dev_pairs)} dev (T), "
          f"{sum(p.split == 'test' for p in pairs)} test, {sum(p.split == 'eval' for p in pairs)} eval; "
          f"held-out families: {', '.join(f.id for f in bank.held_out)} ({time.perf_counter() - t0:.0f} s to rebuild the states)",
          flush=True)
    return pairs, train_pairs, dev_pairs


def measure_again(folder: Path, pairs: Sequence[Pair], bank: Bank, args) -> int:
    """``--measure-only``: the folder as it ships, measured anew into its metrics and card."""
    metrics_path = folder / "metrics.json"
    metrics = json.loads(metrics_path.read_text()) if metrics_path.is_file() else {}
    metrics["measured"] = measure(folder, pairs, bank, args)
    return finish(folder, read_config(folder), metrics, bank)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    bank = load_bank()
    pairs, train_pairs, dev_pairs = labelled_pairs(bank, args.limit)
    folder = args.out / args.name
    metrics_path = folder / "metrics.json"
    if args.measure_only:
        return measure_again(folder, pairs, bank, args)

    if args.from_checkpoint:  # a run stopped before its end: ship its last checkpoint as it is
        state = torch.load(args.from_checkpoint, weights_only=True)
        encoder_weights, head_weights = state["encoder"], state["head"]
        init_questions = init_weights(args)[2] | {p.question_id for p in pairs if p.split in ("train", "dev")}
        metrics = {"data": {"train_pairs": len(train_pairs), "dev_pairs": len(dev_pairs), "epochs": args.epochs,
                            "stopped_at_step": state["step"], "init": args.init,
                            "held_out_families": [f.id for f in bank.held_out], "families": len(bank.family),
                            "argv": without_option(sys.argv[1:] if argv is None else argv, "--from-checkpoint")}}
        args.refit = True
    elif args.refit:  # the folder's encoder and head as they are: T and the adapters are fitted again
        config = read_config(folder)
        encoder_weights, head_weights, init_questions = (read_encoder_weights(folder, config), read_weights(folder),
                                                         read_trained_questions(folder))
        args.reading, args.max_length = config.reading, config.max_length
        metrics = json.loads(metrics_path.read_text()) if metrics_path.is_file() else {}
    else:
        encoder_weights, head_weights, init_questions = init_weights(args)
    reader = SharedStateEncoder if args.reading == "shared" else PairEncoder
    encoder = reader(resolve_backbone(args.backbone), args.max_length, args.device, encoder_weights, args.precision)
    head = ScoreHead(encoder.feature_dim, 0).to(encoder.device)
    if head_weights is not None:
        head.load_state_dict(head_weights)
    if not args.refit:
        speed = train(encoder, head, pairs, train_pairs, bank, args)
        if speed is None:
            return 0
        metrics = {"data": {"train_pairs": len(train_pairs), "dev_pairs": len(dev_pairs), "epochs": args.epochs,
                            "init": args.init, "held_out_families": [f.id for f in bank.held_out],
                            "families": len(bank.family), "argv": sys.argv[1:] if argv is None else argv},
                   "throughput": {"pairs": speed.pairs, "minutes": round(speed.seconds / 60, 1),
                                  "seconds_per_pair": round(speed.seconds_per_pair, 4), "threads": torch.get_num_threads(),
                                  "bf16": encoder.bf16, "device": str(encoder.device)}}
        questions = {p.question_id for p in pairs if p.split in ("train", "dev")} | set(init_questions)
    else:
        questions = set(init_questions)

    # Ship half-precision encoder weights; fit T (and the paper monitors' cue heads) with exactly what
    # ships, loaded back, then measure it.
    config = S1ModelConfig(backbone=args.backbone, max_length=encoder.max_length, head_hidden=0, temperature=1.0,
                           encoder_weights=ENCODER_WEIGHTS_FILE, reading=args.reading)
    write_model(folder, config, head.state_dict(), "", encoder={k: v.half() for k, v in encoder.model.state_dict().items()})
    write_trained_questions(folder, questions)
    raw = ClassifierS1(folder, device=args.device, precision=args.precision)
    z_dev = logits(raw, dev_pairs, "dev (T)")
    temperature = fit_temperature(z_dev, np.array([p.p for p in dev_pairs]))
    config = config.model_copy(update={"temperature": temperature})
    metrics["temperature"] = round(temperature, 4)
    if args.cue_heads:
        metrics["gold_dev_encoder"] = measure_gold(raw, bank, temperature)
        config = with_cue_heads(config, raw, pairs, temperature, args.state_limit)
    raw.close()
    (folder / "config.json").write_text(config.model_dump_json(indent=2) + "\n", encoding="utf-8")
    metrics["measured"] = measure(folder, pairs, bank, args)
    return finish(folder, config, metrics, bank)


def train(encoder: PairEncoder, head: ScoreHead, pairs: Sequence[Pair], train_pairs: Sequence[Pair], bank: Bank, args):
    """Fine-tune ``encoder`` and ``head`` in place; the throughput, or None after a speed test."""
    statements = [bank.statement(f"{f.id}.{i}{neg}") for f in bank.family for i in range(len(f.wordings)) for neg in ("", ".not")]
    tokens = StateTokens(encoder, statements + sorted({p.statement for p in pairs}))
    t0 = time.perf_counter()
    plan = plan_epochs(train_pairs, bank, lambda pair, n: len(tokens.state(pair, n)), args)
    print(f"{len(plan)} steps of about {args.batch_size} pairs, {sum(len(st) for _, step in plan for _, st in step)} pairs in "
          f"{args.epochs} epochs; states tokenised in {time.perf_counter() - t0:.0f} s; "
          f"bf16 autocast {'on' if encoder.bf16 else 'off'}, {torch.get_num_threads()} threads", flush=True)
    settings = FitSettings(lr=args.lr, head_lr=args.head_lr, weight_decay=args.weight_decay, seed=args.seed,
                           log_every=args.log_every, checkpoint_every=args.checkpoint_every,
                           freeze_embeddings=args.freeze_embeddings)

    def batch(entry: Step):
        length, step = entry
        return tokens.batch(step, length), [y for _, statements in step for _, y in statements]

    if args.speed_test:
        with tempfile.TemporaryDirectory() as tmp:
            speed = fine_tune(encoder, head, plan[: args.speed_test], batch, settings, Path(tmp) / "checkpoint.pt")
        print(f"speed test: {speed.seconds_per_pair:.3f} s/pair ({speed.pairs} pairs, reading {args.reading}, "
              f"length {plan[0][0]}, embeddings {'frozen' if args.freeze_embeddings else 'trained'})")
        return None
    work = RUNS / args.name
    work.mkdir(parents=True, exist_ok=True)
    speed = fine_tune(encoder, head, plan, batch, settings, work / checkpoint_name(args, len(train_pairs)))
    print(f"trained: {speed.pairs} pairs in {speed.seconds / 60:.1f} min, {speed.seconds_per_pair:.3f} s/pair", flush=True)
    return speed


def logits(s1: ClassifierS1, pairs: Sequence[Pair], progress: str) -> np.ndarray:
    """z of each pair before temperature scaling (the S1 is loaded at T = 1)."""
    p = np.clip(bank_eval.score(s1, pairs, progress=progress) if pairs else np.zeros(0), 1e-7, 1 - 1e-7)
    return np.log(p / (1 - p)) * s1.temperature


def paper_examples(pairs: Sequence[Pair], split: str) -> list[Example]:
    return [Example(p.sid, p.question_id, p.key, p.task, p.reasoning, p.p) for p in pairs
            if p.source == "paper" and p.split == split]


def with_cue_heads(config: S1ModelConfig, raw: ClassifierS1, pairs: Sequence[Pair], temperature: float,
                   state_limit: int) -> S1ModelConfig:
    """The paper monitors' cue heads over this encoder (``training/s1/cue_heads.py``): cue weights on the
    train split's reader labels, joined to the encoder's logit on dev. They apply to those two exact
    statements only, so every other statement is read as the general S1 reads it."""
    heads, statements = {}, {}
    for monitor in PAPER_MONITORS:
        train_ex = [e for e in paper_examples(pairs, "train") if e.monitor == monitor]
        dev = [p for p in pairs if p.source == "paper" and p.split == "dev" and p.key == monitor]
        heads[monitor], _ = fit_cue_head(train_ex, paper_examples(dev, "dev"), logits(raw, dev, f"dev {monitor}"), temperature)
        statements[monitor] = dev[0].statement
    return config.model_copy(update={"statements": statements, "cue_heads": heads, "state_limit": state_limit})


def measure_gold(raw: ClassifierS1, bank: Bank, temperature: float) -> dict | None:
    """Gold figures of the paper monitors through ``raw`` (loaded at T = 1) scaled by ``temperature``."""
    gold = gold_pairs()
    if not gold:
        return None
    return bank_eval.figures(gold, scaled_probs(logits(raw, gold, "gold (encoder)"), temperature), bank)


def gold_pairs() -> list[Pair]:
    """``gold_dev`` states of the paper monitors, as pairs (measured only)."""
    from soma_local.engine.monitors import resolve_monitors

    path = gold_dev(data_dir())
    if not path.is_file():
        return []
    statements = {m.name: m.statement for m in resolve_monitors(list(PAPER_MONITORS))}
    return [Pair(e.key, e.question_id, "eval", "gold", f"paper_{e.monitor}", e.monitor, statements[e.monitor],
                 e.task, e.reasoning, e.label) for e in read_labelled(path) if e.monitor in statements]


def finish(folder: Path, config: S1ModelConfig, metrics: dict, bank: Bank) -> int:
    (folder / "metrics.json").write_text(json.dumps(metrics, indent=2) + "\n")
    (folder / CARD_FILE).write_text(statement_card(folder.name, config, metrics), encoding="utf-8")
    m = metrics["measured"]
    print(bank_eval.pooled_table({k: v for k, v in m.items() if k != "gold_dev"}))
    print(bank_eval.family_table({"test": m["test"], "eval": m["eval"]}))
    print(bank_eval.form_table({"test": m["test"], "eval": m["eval"]}))
    print(json.dumps({"negation": m["eval"].get("negation"), "middle": m["eval"]["middle"],
                      "gold_dev": {f: v["auroc"] for f, v in m.get("gold_dev", {}).get("families", {}).items()}}, indent=1))
    print(f"saved {folder.relative_to(REPO) if folder.is_relative_to(REPO) else folder}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
