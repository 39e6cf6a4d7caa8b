"""The fine-tuning loop shared by the S1 trainers: AdamW, warm-up then linear decay, soft-label BCE,
checkpoints that resume, and the throughput it reaches (seconds per labelled pair) in its log.

A trainer hands over its whole plan (one entry per step, fixed by its seed, so a resumed run takes the
same batches) and a function that turns a plan entry into (tokenised batch, labels).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import torch

from soma_local.s1.classifier import PairEncoder, ScoreHead


@dataclass
class FitSettings:
    lr: float
    head_lr: float
    weight_decay: float
    seed: int
    log_every: int
    checkpoint_every: int
    warmup: float = 0.06
    freeze_embeddings: bool = False


@dataclass
class Throughput:
    pairs: int
    seconds: float

    @property
    def seconds_per_pair(self) -> float:
        return self.seconds / max(self.pairs, 1)


def fine_tune(encoder: PairEncoder, head: ScoreHead, plan: Sequence, batch: Callable[[object], tuple],
              settings: FitSettings, checkpoint: Path) -> Throughput:
    """Train ``encoder`` and ``head`` over ``plan``; ``batch(entry)`` gives (tokenised batch, labels).
    Returns the throughput of the steps run in this process (a resumed run measures only its own)."""
    torch.manual_seed(settings.seed)
    if settings.freeze_embeddings:  # the word embeddings are half of MiniLM's weights and barely move
        encoder.model.get_input_embeddings().weight.requires_grad_(False)
    trained = encoder.trainable()
    fast = {id(p) for p in encoder.fast_parameters()}  # new weights that start at zero learn at the head's rate
    optim = torch.optim.AdamW([{"params": [p for p in trained if id(p) not in fast], "lr": settings.lr},
                               {"params": [*head.parameters(), *(p for p in trained if id(p) in fast)], "lr": settings.head_lr}],
                              weight_decay=settings.weight_decay)
    total = len(plan)
    warm = max(1, int(settings.warmup * total))
    sched = torch.optim.lr_scheduler.LambdaLR(optim, lambda s: min((s + 1) / warm, max(0.0, (total - s) / max(1, total - warm))))
    step, before = 0, (0.0, 0)  # time and pairs of the steps run before a resume
    if checkpoint.exists():
        state = torch.load(checkpoint, weights_only=True)
        encoder.load_trained_state(state["encoder"])
        head.load_state_dict(state["head"])
        optim.load_state_dict(state["optim"])
        sched.load_state_dict(state["sched"])
        step = state["step"]
        before = (state.get("seconds", 0.0), state.get("pairs", 0))
        print(f"resuming at step {step} of {total}", flush=True)
    loss_fn = torch.nn.BCEWithLogitsLoss()
    t0, seen, done, recent = time.perf_counter(), 0, 0, []
    for step in range(step, total):
        encoder.train_mode(True)
        head.train()
        inputs, labels = batch(plan[step])
        loss = loss_fn(head(encoder.run(inputs, grad=True)).float(), torch.as_tensor(labels, dtype=torch.float32, device=encoder.device))
        optim.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(trained + list(head.parameters()), 1.0)
        optim.step()
        sched.step()
        seen, done = seen + len(labels), done + 1
        recent.append(loss.item())
        if (step + 1) % settings.log_every == 0 or step + 1 == total:
            spent = time.perf_counter() - t0
            print(f"step {step + 1}/{total} loss {sum(recent) / len(recent):.4f} {spent / seen:.3f} s/pair "
                  f"(~{(total - step - 1) * spent / done / 60:.0f} min left)", flush=True)
            recent = []
        if (step + 1) % settings.checkpoint_every == 0 or step + 1 == total:
            torch.save({"encoder": encoder.trained_state(), "head": head.state_dict(), "optim": optim.state_dict(),
                        "sched": sched.state_dict(), "step": step + 1,
                        "seconds": before[0] + time.perf_counter() - t0, "pairs": before[1] + seen}, checkpoint)
    return Throughput(seen, time.perf_counter() - t0)
