"""Fine-tune an S1 cross-encoder end to end on reader labels, fit T on held-out reader labels, ship it.

    python -m training.s1.finetune --name minilm-reader

Steps: rebuild the labelled states from the data directory (``training/data/reader_labels.jsonl``
holds references only); split by question into training and held-out (T is fitted on the held-out
reader labels, never on gold); fine-tune every backbone weight and the head with soft-label BCE
(checkpointed every few hundred examples, so an interrupted run resumes where it stopped); fit T;
fit each monitor's cue head (``training/s1/cue_heads.py``: text cues over the whole state, which the
512-token encoder cannot read, joined to the encoder's logit on held-out); report AUROC / ECE / Brier
on held-out and on gold (measured only, with the model loaded back as it ships); save the model, its
card and the training questions. ``--encoder-from FOLDER`` skips the fine-tuning and refits the rest
over an S1 already trained.

Cost on a CPU is dominated by the encoder's forward and backward passes: states are bucketed by length
so a batch pads little, and the state builder cuts them to the input limit exactly as serving does.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path
from typing import Sequence

import numpy as np
import torch

from soma_local.calibration.recorded import load_all
from soma_local.data_dir import data_dir
from soma_local.engine.monitors import resolve_monitors
from soma_local.errors import ModelFileError
from soma_local.s1.classifier import PRECISIONS, ClassifierS1, PairEncoder, ScoreHead
from soma_local.s1.model_folders import (CARD_FILE, ENCODER_WEIGHTS_FILE, S1_MODELS_DIR, CueHead, S1ModelConfig, read_config,
                                  read_encoder_weights, read_weights, resolve_backbone, resolve_s1_model, write_model,
                                  write_trained_questions)
from soma_local.s1.state import build_state, longest_tokens
from soma_local.s1.temperature import fit_temperature
from training.labels.examples import Example, read_labelled, split_by_question
from training.labels.readers import StateLabel, examples as reader_examples, read_labels
from training.paths import READER_LABELS, REPO, RUNS, gold_dev
from training.s1.card import model_card
from training.s1.cue_heads import fit_cue_head
from training.s1.fit import FitSettings, fine_tune
from training.s1.train import report
from training.states.reader_set import training_half


def pairs_of(encoder: PairEncoder, examples: Sequence[Example], statements: dict[str, str]) -> list[tuple[str, str]]:
    """(statement, state) pairs, each state cut to the input limit the way serving cuts it."""
    reserve = longest_tokens(list(statements.values()), encoder.counter) + encoder.special_tokens
    return [(statements[e.monitor], build_state(e.task, e.reasoning, encoder.counter, encoder.max_length, reserve))
            for e in examples]


def length_batches(pairs: Sequence[tuple[str, str]], batch_size: int, rng: random.Random) -> list[list[int]]:
    """Batches of similar length (little padding), in a random order; a fixed rng makes them repeatable."""
    order = sorted(range(len(pairs)), key=lambda i: (len(pairs[i][1]) + rng.random() * 200))
    batches = [order[i : i + batch_size] for i in range(0, len(order), batch_size)]
    rng.shuffle(batches)
    return batches


@torch.inference_mode()
def logits_of(encoder: PairEncoder, head: ScoreHead, pairs: Sequence[tuple[str, str]], batch: int = 16) -> np.ndarray:
    encoder.model.eval()
    head.eval()
    order = sorted(range(len(pairs)), key=lambda i: len(pairs[i][1]))
    out = np.zeros(len(pairs))
    for s in range(0, len(order), batch):
        idx = order[s : s + batch]
        out[idx] = head(encoder.features([pairs[i] for i in idx])).double().cpu().numpy()
    return out


def train(encoder: PairEncoder, head: ScoreHead, pairs, labels: np.ndarray, args, checkpoint: Path) -> None:
    """AdamW, linear warm-up then linear decay; encoder and head at their own learning rates."""
    plan = [b for epoch in range(args.epochs) for b in length_batches(pairs, args.batch_size, random.Random(args.seed + epoch))]
    settings = FitSettings(lr=args.lr, head_lr=args.head_lr, weight_decay=args.weight_decay, seed=args.seed,
                           log_every=args.log_every, checkpoint_every=args.checkpoint_every)
    fine_tune(encoder, head, plan, lambda idx: (encoder.tokenize([pairs[i] for i in idx]), labels[idx]), settings, checkpoint)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m training.s1.finetune", description=__doc__.split("\n\n")[0])
    ap.add_argument("--name", default="minilm-reader", help="folder name under s1_models/")
    ap.add_argument("--backbone", default="all-minilm-l6-v2", help="embedded backbone name or local HF folder")
    ap.add_argument("--max-length", type=int, default=512, help="input limit in backbone tokens")
    ap.add_argument("--labels", type=Path, default=READER_LABELS, help="reader label file (references)")
    ap.add_argument("--limit", type=int, default=0, help="use only the first N labelled states (0 = all; for a quick check)")
    ap.add_argument("--held-out", type=float, default=0.2, help="share of the labelled questions held out (fits T)")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--lr", type=float, default=5e-5, help="encoder learning rate")
    ap.add_argument("--head-lr", type=float, default=1e-3)
    ap.add_argument("--weight-decay", type=float, default=0.01)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--log-every", type=int, default=10, help="steps between progress lines")
    ap.add_argument("--checkpoint-every", type=int, default=25, help="steps between checkpoints")
    ap.add_argument("--precision", choices=PRECISIONS, default=None,
                    help="encoder matrix work (default auto, SOMA_S1_PRECISION: bfloat16 autocast where the device has it"
                         " natively, which roughly halves a step; weights and optimiser state stay float32)")
    ap.add_argument("--device", default=None, help="cpu | cuda | auto (default; SOMA_S1_DEVICE)")
    ap.add_argument("--out", type=Path, default=S1_MODELS_DIR, help="where released S1s live")
    ap.add_argument("--no-cues", dest="cues", action="store_false", help="the encoder alone, without cue heads")
    ap.add_argument("--state-limit", type=int, default=2048,
                    help="tokens of S1 state the cue heads read (the encoder reads the newest --max-length)")
    ap.add_argument("--encoder-from", type=Path,
                    help="an S1 folder whose fine-tuned encoder and head to reuse: refit T and the cue heads only")
    return ap.parse_args(argv)


def encoder_from(args: argparse.Namespace) -> tuple[dict | None, dict | None, dict]:
    """(backbone weights, head weights, how they were trained) of ``--encoder-from``, or nothing to load."""
    if args.encoder_from is None:
        return None, None, {}
    folder = resolve_s1_model(str(args.encoder_from))
    config = read_config(folder)
    if not config.encoder_weights or config.backbone != args.backbone or config.max_length != args.max_length:
        raise ModelFileError(f"{folder}: --encoder-from needs a fine-tuned S1 of backbone '{args.backbone}' at "
                             f"{args.max_length} tokens (it has '{config.backbone}' at {config.max_length}"
                             f"{'' if config.encoder_weights else ', not fine-tuned'})")
    metrics = folder / "metrics.json"
    trained = json.loads(metrics.read_text())["data"] if metrics.is_file() else {}
    return (read_encoder_weights(folder, config), read_weights(folder),
            {"epochs": trained.get("epochs", "?"), "encoder_argv": trained.get("encoder_argv", trained.get("argv", []))})


def fit_cue_heads(train_ex: Sequence[Example], held_ex: Sequence[Example], z_held: np.ndarray, temperature: float,
                  monitors: Sequence[str]) -> tuple[dict[str, CueHead], np.ndarray]:
    """Each monitor's cue head, and the held-out logits of the joined S1 (cross-validated by question)."""
    heads, z_joined = {}, np.zeros(len(held_ex))
    for monitor in monitors:
        idx = np.array([e.monitor == monitor for e in held_ex])
        heads[monitor], z_joined[idx] = fit_cue_head([e for e in train_ex if e.monitor == monitor],
                                                     [e for e in held_ex if e.monitor == monitor], z_held[idx], temperature)
    return heads, z_joined


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    root = data_dir()
    statements = {m.name: m.statement for m in resolve_monitors(["overthinking", "unanswerable"])}
    rows = read_labels(StateLabel, args.labels)
    examples = [e for e in reader_examples(rows, root) if e.monitor in statements]
    if args.limit:
        examples = examples[: args.limit]
    train_ex, held_ex = split_by_question(examples, args.held_out, args.seed)
    gold_path = gold_dev(root)
    gold = [e for e in read_labelled(gold_path) if e.monitor in statements] if gold_path.is_file() else []
    print(f"examples: {len(train_ex)} train, {len(held_ex)} held-out (reader labels), {len(gold)} gold (measured only)")

    encoder_weights, head_weights, trained = encoder_from(args)
    encoder = PairEncoder(resolve_backbone(args.backbone), args.max_length, args.device, encoder_weights, args.precision)
    head = ScoreHead(encoder.feature_dim, 0).to(encoder.device)
    if head_weights is not None:
        head.load_state_dict(head_weights)
        print(f"encoder and head from {args.encoder_from}: not trained again")
    else:
        work = RUNS / args.name
        work.mkdir(parents=True, exist_ok=True)
        tag = f"{len(train_ex)}x{args.epochs}ep-len{encoder.max_length}-bs{args.batch_size}-lr{args.lr}-bf{int(encoder.bf16)}-seed{args.seed}"
        pairs = pairs_of(encoder, train_ex, statements)
        train(encoder, head, pairs, np.array([e.label for e in train_ex]), args, work / f"finetune-{tag}.pt")
        trained = {"epochs": args.epochs, "encoder_argv": sys.argv[1:] if argv is None else argv}
        # Ship half-precision encoder weights; measure and fit T with exactly what ships.
        encoder.model.load_state_dict({k: v.half().float() for k, v in encoder.model.state_dict().items()})

    y_held, m_held = np.array([e.label for e in held_ex]), np.array([e.monitor for e in held_ex])
    z_held = logits_of(encoder, head, pairs_of(encoder, held_ex, statements))
    temperature = fit_temperature(z_held, y_held)
    cue_heads, z_joined = fit_cue_heads(train_ex, held_ex, z_held, temperature, list(statements)) if args.cues else ({}, None)
    metrics = {"temperature": round(temperature, 4), "head_hidden": 0, "held_out": report(z_held, y_held, m_held, temperature)}
    if cue_heads:
        metrics["held_out_s1"] = report(z_joined, y_held, m_held, 1.0)
    config = S1ModelConfig(backbone=args.backbone, max_length=encoder.max_length, head_hidden=0,
                           temperature=temperature, statements=statements, encoder_weights=ENCODER_WEIGHTS_FILE,
                           state_limit=args.state_limit if cue_heads else None, cue_heads=cue_heads)
    data = {"train": len(train_ex), "held_out": len(held_ex), "gold": len(gold), "teacher": "reader",
            "labels": str(args.labels.relative_to(REPO)) if args.labels.is_absolute() else str(args.labels),
            "traces": ["DATA/traces"],
            "drawn": "the seeded draw of `training/states/reader_batches.py` (overthinking: answerable traces, later cuts "
                     "weighted up; unanswerable: half from unanswerable, half from answerable questions)",
            "excluded": "Only the training half of each dataset's questions (`training.states.reader_set.training_half`, seeded) "
                        "was drawn from, never a question in `s1_labels/reserved_questions.txt`; the other half is left "
                        "to replay and threshold calibration",
            "positives_train": int(sum(e.label >= 0.5 for e in train_ex)), **trained,
            "argv": sys.argv[1:] if argv is None else argv}
    folder = args.out / args.name
    write_model(folder, config, head.state_dict(), "", encoder={k: v.half() for k, v in encoder.model.state_dict().items()})
    if gold:  # measured with exactly what ships, loaded back from the folder
        y_gold, m_gold = np.array([e.label for e in gold]), np.array([e.monitor for e in gold])
        metrics["gold_dev_encoder"] = report(logits_of(encoder, head, pairs_of(encoder, gold, statements)), y_gold, m_gold, temperature)
        s1 = ClassifierS1(folder, device=args.device, precision=args.precision)
        every = list(statements.values())
        z_gold = np.concatenate([s1.logits([(statements[e.monitor], s1.state_for(e.task, e.reasoning, every))]) for e in gold])
        metrics["gold_dev"] = report(z_gold, y_gold, m_gold, temperature)
    (folder / CARD_FILE).write_text(model_card(args.name, config, metrics, data), encoding="utf-8")
    traces = load_all(root)
    write_trained_questions(folder, training_half((t.dataset, t.answerable, t.question_id) for t in traces))
    (folder / "metrics.json").write_text(json.dumps({"data": data, **metrics}, indent=2) + "\n")
    print(json.dumps({k: v for k, v in metrics.items() if k != "candidates"}, indent=2))
    print(f"saved {folder}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
