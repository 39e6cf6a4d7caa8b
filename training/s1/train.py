"""Train an S1 classifier from scratch to a saved, calibrated model in ``s1_models/``, in one command.

    python -m training.s1.train --name minilm-rules

Steps: cut states from the traces at the scan schedule; label them (default: rules); split by question
(gold questions excluded); encode each (statement, state) with the frozen backbone (cached in chunks
under ``training/runs/NAME``, so an interrupted run resumes where it stopped); fit the head with fixed
seeds (checkpointed per epoch); fit T on the held-out split; report AUROC / ECE / Brier before and
after scaling on held-out and on the gold set; save the model with its card.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import sys
from pathlib import Path
from typing import Sequence

import numpy as np
import torch
from tqdm import tqdm

from soma_local.calibration.recorded import load_trace_files
from soma_local.data_dir import data_dir, shareable_path
from soma_local.errors import SomaError
from soma_local.s2.model_files import GgufVocab, resolve_gguf
from soma_local.engine.monitors import Monitor, resolve_monitors
from soma_local.s1.classifier import PairEncoder, ScoreHead
from soma_local.s1.model_folders import S1_MODELS_DIR, S1ModelConfig, resolve_backbone, write_model, write_trained_questions
from soma_local.s1.state import build_state, longest_tokens
from soma_local.s1.temperature import evaluate, fit_temperature, nll, scaled_probs
from training.labels.examples import (Example, gold_question_ids, label_with_rules, label_with_s1, read_labelled,
                                      sample_cuts, split_by_question)
from training.paths import RUNS, gold_dev, gold_labels
from training.s1.card import model_card
from training.states.cuts import trace_cuts

CHUNK = 32


def build_examples(args, monitors: Sequence[Monitor], exclude: set[str]) -> list[Example]:
    if args.teacher.startswith("file:"):
        return [e for e in read_labelled(Path(args.teacher[5:])) if e.question_id not in exclude]
    traces = [t for t in load_trace_files(args.traces) if t.question_id not in exclude]
    vocab = GgufVocab.from_path(resolve_gguf(None))
    cuts = [c for t in tqdm(traces, desc="cutting states", unit="trace") for c in trace_cuts(t, vocab)]
    teacher = None
    if args.teacher.startswith("s1:"):
        from soma_local.s1.factory import load_s1

        teacher = load_s1(args.teacher[3:])
    elif args.teacher != "rules":
        raise SomaError(f"--teacher: expected rules, s1:SPEC or file:PATH, got '{args.teacher}'")
    examples: list[Example] = []
    for i, monitor in enumerate(monitors):
        chosen = sample_cuts(cuts, args.per_trace, args.per_monitor, args.seed + i)
        examples += label_with_s1(chosen, monitor, teacher) if teacher else label_with_rules(chosen, monitor)
    return examples


def encode(encoder: PairEncoder, examples: Sequence[Example], statements: dict[str, str], cache: Path, desc: str) -> np.ndarray:
    """Features of every example, computed chunk by chunk and cached so a rerun resumes."""
    reserve = longest_tokens(list(statements.values()), encoder.counter) + encoder.special_tokens
    # The backbone and precision are part of the key: another backbone under the same --name, or bf16
    # features (they differ from float32 ones in the fourth decimal), must not resume this cache.
    key = [encoder.model.config.name_or_path, encoder.max_length, reserve, encoder.bf16]
    key += [(e.key, e.monitor) for e in examples]
    digest = hashlib.sha256(json.dumps(key).encode()).hexdigest()[:16]
    folder = cache / f"features-{desc}-{digest}"
    folder.mkdir(parents=True, exist_ok=True)
    chunks = []
    for start in tqdm(range(0, len(examples), CHUNK), desc=f"encoding {desc}", unit="chunk"):
        path = folder / f"{start // CHUNK:05d}.npy"
        if not path.exists():
            batch = examples[start : start + CHUNK]
            pairs = [(statements[e.monitor], build_state(e.task, e.reasoning, encoder.counter, encoder.max_length, reserve))
                     for e in batch]
            np.save(path, np.concatenate([encoder.features(pairs[i : i + 8]).cpu().numpy() for i in range(0, len(pairs), 8)]))
        chunks.append(np.load(path))
    return np.concatenate(chunks) if chunks else np.zeros((0, encoder.feature_dim), dtype=np.float32)


def train_head(x: np.ndarray, y: np.ndarray, hidden: int, args, checkpoint: Path) -> ScoreHead:
    """Soft-label BCE with AdamW; the checkpoint (weights, optimiser, epoch) is rewritten every epoch."""
    torch.manual_seed(args.seed)
    head = ScoreHead(x.shape[1], hidden)
    optim = torch.optim.AdamW(head.parameters(), lr=args.lr, weight_decay=args.weight_decay)
    epoch = 0
    if checkpoint.exists():
        state = torch.load(checkpoint, weights_only=True)
        head.load_state_dict(state["head"])
        optim.load_state_dict(state["optim"])
        epoch = state["epoch"]
    xt, yt = torch.from_numpy(x).float(), torch.from_numpy(y).float()
    gen = torch.Generator().manual_seed(args.seed)
    loss_fn = torch.nn.BCEWithLogitsLoss()
    bar = tqdm(range(epoch, args.epochs), desc=f"training head (hidden={hidden})", unit="epoch")
    for epoch in bar:
        gen.manual_seed(args.seed + epoch)  # the same batches whether or not the run was resumed
        head.train()
        for idx in torch.randperm(len(xt), generator=gen).split(args.batch_size):
            optim.zero_grad()
            loss = loss_fn(head(xt[idx]), yt[idx])
            loss.backward()
            optim.step()
        bar.set_postfix(loss=f"{loss.item():.3f}")
        torch.save({"head": head.state_dict(), "optim": optim.state_dict(), "epoch": epoch + 1}, checkpoint)
    return head.eval()


@torch.inference_mode()
def logits_of(head: ScoreHead, x: np.ndarray) -> np.ndarray:
    return head(torch.from_numpy(x).float()).double().numpy()


def report(z: np.ndarray, y: np.ndarray, monitors: np.ndarray, temperature: float) -> dict:
    """Metrics per monitor and overall, before (T=1) and after temperature scaling."""
    out = {}
    for name in ["all", *sorted(set(monitors))]:
        mask = np.ones_like(y, dtype=bool) if name == "all" else monitors == name
        out[name] = {"before": evaluate(scaled_probs(z[mask], 1.0), y[mask]).as_dict(),
                     "after": evaluate(scaled_probs(z[mask], temperature), y[mask]).as_dict()}
    return out


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m training.s1.train", description=__doc__.split("\n")[0])
    ap.add_argument("--name", default="minilm-rules", help="folder name under s1_models/")
    ap.add_argument("--backbone", default="all-minilm-l6-v2", help="embedded backbone name or local HF folder")
    ap.add_argument("--max-length", type=int, default=512, help="input limit in backbone tokens")
    ap.add_argument("--traces", type=Path, nargs="+", help="trace files/folders (default: DATA/traces)")
    ap.add_argument("--teacher", default="rules", help="rules | s1:SPEC | file:PATH")
    ap.add_argument("--monitors", nargs="+", default=["overthinking", "unanswerable"])
    ap.add_argument("--per-trace", type=int, default=2, help="states drawn per trace and monitor")
    ap.add_argument("--per-monitor", type=int, default=1000, help="states per monitor")
    ap.add_argument("--held-out", type=float, default=0.25, help="share of questions held out (fits T)")
    ap.add_argument("--hidden", type=int, nargs="+", default=[0, 64], help="head sizes to try (0 = linear); the best held-out NLL ships")
    ap.add_argument("--epochs", type=int, default=60)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--weight-decay", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default=None, help="cpu | cuda | auto (default)")
    ap.add_argument("--out", type=Path, default=S1_MODELS_DIR, help="where released S1s live")
    ap.add_argument("--split-only", action="store_true",
                    help="only (re)write the model's trained_questions.json from the same seeded split, no training")
    args = ap.parse_args(argv)
    args.traces = args.traces or [data_dir() / "traces"]
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    random.seed(args.seed)
    np.random.seed(args.seed)
    monitors = resolve_monitors(args.monitors)
    statements = {m.name: m.statement for m in monitors}
    work = RUNS / args.name
    work.mkdir(parents=True, exist_ok=True)
    gold_dir = gold_labels(data_dir())
    exclude = gold_question_ids(gold_dir) if gold_dir.is_dir() else set()
    examples = build_examples(args, monitors, exclude)
    train, held = split_by_question(examples, args.held_out, args.seed)
    folder = args.out / args.name
    if args.split_only:
        folder.mkdir(parents=True, exist_ok=True)
        write_trained_questions(folder, {e.question_id for e in train})
        print(f"wrote {folder}: {len(train)} training states over {len({e.question_id for e in train})} questions")
        return 0
    gold = [e for e in read_labelled(gold_dev(data_dir())) if e.monitor in statements] if gold_dev(data_dir()).is_file() else []
    print(f"examples: {len(train)} train, {len(held)} held-out, {len(gold)} gold (gold questions excluded: {len(exclude)})")

    encoder = PairEncoder(resolve_backbone(args.backbone), args.max_length, args.device)
    x_train, x_held = encode(encoder, train, statements, work, "train"), encode(encoder, held, statements, work, "held")
    x_gold = encode(encoder, gold, statements, work, "gold") if gold else None
    y_train, y_held = np.array([e.label for e in train]), np.array([e.label for e in held])
    m_held = np.array([e.monitor for e in held])

    candidates = {}
    for hidden in args.hidden:
        head = train_head(x_train, y_train, hidden, args, work / f"head-{hidden}-{args.epochs}ep-seed{args.seed}.pt")
        z = logits_of(head, x_held)
        t = fit_temperature(z, y_held)
        candidates[hidden] = (nll(z, y_held, t), head, t)
        print(f"head hidden={hidden}: held-out NLL {candidates[hidden][0]:.4f} at T={t:.3f}")
    hidden = min(candidates, key=lambda h: candidates[h][0])
    _, head, temperature = candidates[hidden]

    metrics = {"temperature": round(temperature, 4), "head_hidden": hidden,
               "held_out": report(logits_of(head, x_held), y_held, m_held, temperature)}
    if gold:
        metrics["gold_dev"] = report(logits_of(head, x_gold), np.array([e.label for e in gold]),
                                     np.array([e.monitor for e in gold]), temperature)
    metrics["candidates"] = {str(h): {"held_out_nll": round(c[0], 4), "temperature": round(c[2], 4)} for h, c in candidates.items()}
    config = S1ModelConfig(backbone=args.backbone, max_length=encoder.max_length, head_hidden=hidden,
                           temperature=temperature, statements=statements)
    data = {"train": len(train), "held_out": len(held), "gold": len(gold), "teacher": args.teacher,
            "traces": [shareable_path(p) for p in args.traces], "excluded_questions": len(exclude),
            "positives_train": int((y_train >= 0.5).sum()), "argv": sys.argv[1:] if argv is None else argv}
    write_model(folder, config, head.state_dict(), model_card(args.name, config, metrics, data))
    write_trained_questions(folder, {e.question_id for e in train})
    (folder / "metrics.json").write_text(json.dumps({"data": data, **metrics}, indent=2) + "\n")
    print(json.dumps(metrics, indent=2))
    print(f"saved {folder}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
