"""Train the whole-state S1: the statement reader's encoder reads every chunk of the state, frozen, and a
trainable copy of its layers reads the statements over all the chunks (``soma_local.s1.chunked``).

    python -m training.s1.whole_state --name minilm-whole                 # train, fit T, measure, ship
    python -m training.s1.whole_state --name minilm-whole --speed-test 10 # seconds per pair, nothing saved
    python -m training.s1.whole_state --name minilm-whole --init minilm-whole --steps 700 --seed 1
                                                                          # a further stage from what ships

Why this split. Encoding a whole state with gradients would cost a backward pass through 2,048 tokens
per state; with the state side frozen, a state costs one forward pass (no gradients) and only the
statements' few tokens are trained, reading every chunk at every layer. It starts as ``--init`` (the
statement reader) exactly: its head, its layers copied for the statement side, age vectors at zero.

Data and splits are the statement reader's (``training.labels.pairs``): bank pairs of ``train``
questions in trained families plus ``--paper-per-epoch`` paper-monitor states; a share of each epoch's
pairs shown in another wording, as a negation, or (``--form-share``) as the family's question,
instruction or label. T is fitted on ``dev``; held-out families, ``test``, ``eval`` and gold are
measured only. States are the labelled ones whole (the last 7,000 characters of reasoning, as
labelled), read through ``--chunk-tokens`` chunks. Each log line prints seconds per labelled pair;
checkpoints every ``--checkpoint-every`` steps under ``training/runs/NAME/``: rerunning the same
command resumes there, also in a later session if the checkpoint was kept.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch

from soma_local.errors import ModelFileError
from soma_local.s1.chunked import ChunkedStateEncoder
from soma_local.s1.classifier import PRECISIONS, ClassifierS1, ScoreHead
from soma_local.s1.model_folders import (CARD_FILE, S1_MODELS_DIR, WEIGHTS_FILE, S1ModelConfig, read_config,
                                         read_encoder_weights, read_reader_weights, read_trained_questions, read_weights, resolve_backbone, resolve_s1_model,
                                         write_trained_questions)
from soma_local.s1.state import format_state
from soma_local.s1.temperature import fit_temperature
from training.bank.statement_bank import load_bank
from training.paths import RUNS
from training.s1.fit import FitSettings, fine_tune
from training.s1.statement_reader import (finish, labelled_pairs, limit_states, logits, measure, measure_again, measure_gold,
                                         plan_epochs, with_cue_heads, without_option)

READER_WEIGHTS_FILE = "reader.safetensors"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m training.s1.whole_state", description=__doc__.split("\n\n")[0])
    ap.add_argument("--name", default="minilm-whole", help="folder name under s1_models/")
    ap.add_argument("--init", default="minilm-statements", help="the shared-reading S1 whose encoder and head it starts from")
    ap.add_argument("--max-length", type=int, default=2048, help="tokens of state read (task and reasoning chunks)")
    ap.add_argument("--chunk-tokens", type=int, default=256, help="tokens of reasoning per chunk")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=32, help="labelled pairs per step (whole states: a few more)")
    ap.add_argument("--paper-per-epoch", type=int, default=600, help="paper-monitor states (one statement each) per epoch")
    ap.add_argument("--lr", type=float, default=3e-5, help="the statement layers' learning rate")
    ap.add_argument("--head-lr", type=float, default=3e-4, help="the head's and the age vectors' learning rate (they start at zero)")
    ap.add_argument("--weight-decay", type=float, default=0.01)
    ap.add_argument("--reword-share", type=float, default=0.5)
    ap.add_argument("--negation-share", type=float, default=0.3)
    ap.add_argument("--form-share", type=float, default=0.3, help="share of the non-negated rewordings shown as a question, "
                                                                  "instruction or label of the family")
    ap.add_argument("--steps", type=int, default=0, help="train the plan's first N steps only (0 = all): with --init a "
                                                          "whole-state S1, a further stage of its training that fits a session")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--log-every", type=int, default=10)
    ap.add_argument("--checkpoint-every", type=int, default=20)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--precision", choices=PRECISIONS, default=None)
    ap.add_argument("--device", default=None)
    ap.add_argument("--out", type=Path, default=S1_MODELS_DIR)
    ap.add_argument("--speed-test", type=int, default=0, metavar="STEPS")
    ap.add_argument("--measure-only", action="store_true", help="measure s1_models/NAME as it ships; train nothing")
    ap.add_argument("--from-checkpoint", type=Path, help="ship this checkpoint of a run stopped before its end")
    ap.add_argument("--no-cue-heads", dest="cue_heads", action="store_false",
                    help="ship no cue heads for the paper monitors (by default they are fitted over the reader; gold is "
                         "measured with and without them)")
    ap.add_argument("--eval-limit", type=int, default=0, help="measure on N states of each set, spread over it (0 = all)")
    ap.add_argument("--dev-limit", type=int, default=0, help="fit T on N dev states, spread over them (0 = all)")
    args = ap.parse_args(argv)
    args.short_epochs, args.short_length = 0, args.max_length  # plan_epochs' settings: whole states every epoch
    return args


def checkpoint_name(args, n_pairs: int) -> str:
    keys = ("init", "max_length", "chunk_tokens", "epochs", "batch_size", "paper_per_epoch", "lr", "head_lr",
            "weight_decay", "reword_share", "negation_share", "form_share", "seed", "steps")
    digest = hashlib.sha256(json.dumps([n_pairs, *(getattr(args, k) for k in keys)]).encode()).hexdigest()[:12]
    return f"checkpoint-{digest}.pt"


def build(args) -> tuple[ChunkedStateEncoder, ScoreHead, S1ModelConfig, Path]:
    """The encoder and head to train: from a shared-reading S1 (its layers copied for the statement side,
    age vectors at zero), or from a whole-state S1 as it ships, to go on training it: a run longer than
    one session continues from what is committed."""
    folder = resolve_s1_model(args.init)
    config = read_config(folder)
    if config.reading == "chunked":
        if config.chunk_tokens != args.chunk_tokens:
            raise ModelFileError(f"{folder}: reads chunks of {config.chunk_tokens} tokens, not --chunk-tokens {args.chunk_tokens}")
        reader = read_reader_weights(folder, config)
    elif config.reading == "shared" and config.encoder_weights and config.head_hidden == 0:
        reader = None
    else:
        raise ModelFileError(f"{folder}: --init needs a shared-reading S1 with fine-tuned encoder weights and a linear head, "
                             f"or a whole-state (chunked) S1")
    encoder = ChunkedStateEncoder(resolve_backbone(config.backbone), args.max_length, args.device,
                                  read_encoder_weights(folder, config), args.precision, chunk_tokens=args.chunk_tokens,
                                  reader=reader, cache_chunks=0)
    head = ScoreHead(encoder.feature_dim, 0).to(encoder.device)
    head.load_state_dict(read_weights(folder))
    return encoder, head, config, folder


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    bank = load_bank()
    pairs, train_pairs, dev_pairs = labelled_pairs(bank)
    out = args.out / args.name
    if args.measure_only:
        return measure_again(out, pairs, bank, args)

    encoder, head, init_config, init_folder = build(args)
    settings = FitSettings(lr=args.lr, head_lr=args.head_lr, weight_decay=args.weight_decay, seed=args.seed,
                           log_every=args.log_every, checkpoint_every=args.checkpoint_every)
    plan = plan_epochs(train_pairs, bank, lambda pair, n: len(pair.reasoning) // 4, args)
    plan = plan[: args.steps] if args.steps else plan

    def batch(entry):
        _, step = entry
        return ([(s, format_state(p.task, p.reasoning)) for p, statements in step for s, _ in statements],
                [y for _, statements in step for _, y in statements])

    print(f"{len(plan)} steps of about {args.batch_size} pairs in {args.epochs} epochs; chunks of {args.chunk_tokens}, "
          f"{torch.get_num_threads()} threads, bf16 {'on' if encoder.bf16 else 'off'}", flush=True)
    if args.speed_test:
        with tempfile.TemporaryDirectory() as tmp:
            speed = fine_tune(encoder, head, plan[: args.speed_test], batch, settings, Path(tmp) / "c.pt")
        print(f"speed test: {speed.seconds_per_pair:.3f} s/pair ({speed.pairs} pairs)")
        return 0
    if args.from_checkpoint:
        state = torch.load(args.from_checkpoint, weights_only=True)
        encoder.load_trained_state(state["encoder"])
        head.load_state_dict(state["head"])
        throughput = {"stopped_at_step": state["step"], "of_steps": len(plan), "threads": torch.get_num_threads(),
                      "device": str(encoder.device), "bf16": encoder.bf16}
        if state.get("pairs"):
            throughput |= {"pairs": state["pairs"], "minutes": round(state["seconds"] / 60, 1),
                           "seconds_per_pair": round(state["seconds"] / state["pairs"], 4)}
    else:
        work = RUNS / args.name
        work.mkdir(parents=True, exist_ok=True)
        speed = fine_tune(encoder, head, plan, batch, settings, work / checkpoint_name(args, len(train_pairs)))
        throughput = {"pairs": speed.pairs, "minutes": round(speed.seconds / 60, 1),
                      "seconds_per_pair": round(speed.seconds_per_pair, 4), "threads": torch.get_num_threads(),
                      "device": str(encoder.device), "bf16": encoder.bf16}
    if init_config.reading == "chunked":  # a further stage: what the stages before it cost
        earlier = json.loads((init_folder / "metrics.json").read_text()).get("throughput", {})
        throughput["earlier_stages"] = [*earlier.pop("earlier_stages", []), earlier]
    config = ship(out, encoder, head, init_config, init_folder, args)
    write_trained_questions(out, {p.question_id for p in pairs if p.split in ("train", "dev")}
                            | set(read_trained_questions(init_folder)))
    raw = ClassifierS1(out, device=args.device, precision=args.precision)
    fit_on = limit_states(dev_pairs, args.dev_limit)
    temperature = fit_temperature(logits(raw, fit_on, "dev (T)"), np.array([p.p for p in fit_on]))
    metrics = {"data": {"train_pairs": len(train_pairs), "dev_pairs": len(fit_on), "epochs": args.epochs, "steps": len(plan),
                        "init": args.init, "held_out_families": [f.id for f in bank.held_out], "families": len(bank.family),
                        "argv": without_option(without_option(sys.argv[1:] if argv is None else argv, "--from-checkpoint"),
                                               "--eval-limit")},
               "throughput": throughput, "temperature": round(temperature, 4),
               "gold_dev_encoder": measure_gold(raw, bank, temperature)}
    config = config.model_copy(update={"temperature": temperature})
    if args.cue_heads:
        config = with_cue_heads(config, raw, pairs, temperature, args.max_length)
    raw.close()
    (out / "config.json").write_text(config.model_dump_json(indent=2) + "\n", encoding="utf-8")
    metrics["measured"] = measure(out, pairs, bank, args)
    return finish(out, config, metrics, bank)


def ship(out: Path, encoder: ChunkedStateEncoder, head: ScoreHead, init_config: S1ModelConfig, init_folder: Path,
         args) -> S1ModelConfig:
    """The folder: the statement side and the head here; the state side is the init's encoder, named by a
    relative path rather than copied (it is frozen, so the two models share those 45 MB)."""
    from safetensors.torch import save_file

    out.mkdir(parents=True, exist_ok=True)
    save_file({k: v.detach().half().contiguous().cpu() for k, v in encoder.reader.state_dict().items()},
              str(out / READER_WEIGHTS_FILE))
    save_file({k: v.detach().contiguous().cpu() for k, v in head.state_dict().items()}, str(out / WEIGHTS_FILE))
    config = S1ModelConfig(backbone=init_config.backbone, max_length=args.max_length, head_hidden=0, temperature=1.0,
                           encoder_weights=os.path.relpath(init_folder / init_config.encoder_weights, out), reading="chunked",
                           chunk_tokens=args.chunk_tokens, reader_weights=READER_WEIGHTS_FILE)
    (out / "config.json").write_text(config.model_dump_json(indent=2) + "\n", encoding="utf-8")
    (out / CARD_FILE).write_text("", encoding="utf-8")
    return config


if __name__ == "__main__":
    raise SystemExit(main())
