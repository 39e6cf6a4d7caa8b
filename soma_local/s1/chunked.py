"""Whole-state reading: the S1 reads all of a 2,048-token state, and a scan re-encodes only what is new.

Why chunks. A statement may be about anything in the state (the task restated at the start, a rule
recalled early), but encoding 2,048 tokens jointly costs several times a 384-token read, and every new
token would change every state token's encoding. So the reasoning is cut into chunks of
``chunk_tokens`` tokens, aligned to the START of the reasoning, and each chunk (and the task, as its own
chunk) is encoded alone, its tokens attending only to their own chunk: a chunk's encoding then depends
on its tokens alone, and every chunk but the newest is the same at the next scan. ``ChunkCache`` keeps
each chunk's per-layer keys and values by content, so a run pays for its newest chunk at each pause and
one S1 can serve several runs (or the server's arbitrary text) without mixing them up.

Why per-layer keys and values. A statement's tokens attend to the state at every layer (as in shared
reading, ``classifier.SharedStateEncoder``), so what a statement needs of a chunk is each layer's keys
and values, not only the last hidden states. The statement side has its own copy of the layers (the
reader), trained while the state side stays the frozen encoder of the statement reader it starts from:
state encodings never need a backward pass, and the reader starts as exactly that model.

Why an age embedding. Chunks are encoded without knowing where they sit, so a statement would read a bag
of chunks. Each chunk's keys and values get a learned vector per layer for its age (0 the task, 1 the
newest chunk, 2 the one before, ...), added when a statement reads it: order is known, and the cached
encodings stay valid as chunks age. It starts at zero.

The window: the newest whole chunks whose tokens fit ``max_length`` beside the task (so it slides by
whole chunks once the reasoning outgrows it, and chunks stay aligned).
"""

from __future__ import annotations

import copy
import hashlib
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from soma_local.s1.classifier import PairEncoder
from soma_local.s1.state import PREFIX, parse_state

STATEMENT_ROOM = 64  # positions a statement uses; the state's chunks are placed from here (as shared reading)
MAX_AGE = 24  # age embeddings: the task, then up to 23 chunks from the newest (older ones share the last)
TASK_CHUNKS = 2  # a long task keeps its first and last chunk


@dataclass
class ChunkKV:
    """One chunk's keys and values at every layer, per head: (layers, 2, heads, tokens, head size)."""

    kv: torch.Tensor

    @property
    def tokens(self) -> int:
        return self.kv.shape[3]


class ChunkCache:
    """Chunk encodings by content (``key`` of the token ids), least recently used dropped first beyond
    ``capacity``."""

    def __init__(self, capacity: int = 64) -> None:
        self.capacity = capacity
        self._items: OrderedDict[bytes, ChunkKV] = OrderedDict()
        self.hits = self.misses = 0

    @staticmethod
    def key(ids: Sequence[int]) -> bytes:
        return hashlib.blake2b(torch.tensor(ids, dtype=torch.int32).numpy().tobytes(), digest_size=16).digest()

    def get(self, key: bytes) -> ChunkKV | None:
        item = self._items.get(key)
        if item is None:
            self.misses += 1
            return None
        self._items.move_to_end(key)
        self.hits += 1
        return item

    def put(self, key: bytes, item: ChunkKV) -> None:
        if self.capacity <= 0:
            return
        self._items[key] = item
        self._items.move_to_end(key)
        while len(self._items) > self.capacity:
            self._items.popitem(last=False)

    def clear(self) -> None:
        self._items.clear()

    def __len__(self) -> int:
        return len(self._items)


def _padded(rows: Sequence[list[int]], pad: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Token ids of rows of different lengths in one tensor, and which positions hold a token."""
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad, dtype=torch.long)
    valid = torch.zeros((len(rows), width), dtype=torch.bool)
    for i, r in enumerate(rows):
        ids[i, : len(r)] = torch.tensor(r)
        valid[i, : len(r)] = True
    return ids.to(device), valid.to(device)


def _heads(x: torch.Tensor, n: int) -> torch.Tensor:
    """(batch, tokens, hidden) -> (batch, heads, tokens, head size)."""
    b, t, h = x.shape
    return x.view(b, t, n, h // n).transpose(1, 2)


def _finish(layer: nn.Module, hidden: torch.Tensor, ctx: torch.Tensor) -> torch.Tensor:
    """A BERT layer after its attention: output projection, residual, feed-forward."""
    att = layer.attention
    ctx = ctx.transpose(1, 2).reshape(hidden.shape)
    hidden = att.output.LayerNorm(att.output.dropout(att.output.dense(ctx)) + hidden)
    inner = layer.intermediate.intermediate_act_fn(layer.intermediate.dense(hidden))
    return layer.output.LayerNorm(layer.output.dropout(layer.output.dense(inner)) + hidden)


def _layer(layer: nn.Module, hidden: torch.Tensor, keys: torch.Tensor, values: torch.Tensor,
           mask: torch.Tensor, heads: int) -> torch.Tensor:
    """One BERT layer whose queries come from ``hidden`` and attend to ``keys``/``values`` (already
    projected) under the boolean ``mask`` (batch, 1, queries, keys)."""
    att = layer.attention
    q = _heads(att.self.query(hidden), heads)
    ctx = F.scaled_dot_product_attention(q, _heads(keys, heads), _heads(values, heads), attn_mask=mask,
                                         dropout_p=att.self.dropout.p if layer.training else 0.0)
    return _finish(layer, hidden, ctx)


def _reader_layer(layer: nn.Module, hidden: torch.Tensor, own: torch.Tensor, state: torch.Tensor,
                  age: torch.Tensor, bounds: Sequence[tuple[int, int]]) -> torch.Tensor:
    """A statement layer: each statement's tokens attend to their own tokens (``own``: boolean, batch x
    queries x keys) and to one state's keys and values (``state``: 2 x heads x tokens x head size), which
    every statement shares, so the state side is never copied per statement. The age vectors
    (``age``: 2 x heads x chunks x head size) are constant over a chunk, so they enter as a per-chunk
    score bias and a per-chunk value term (``bounds``: each chunk's first and end token), never added to each key."""
    att = layer.attention.self
    n, s, _ = hidden.shape
    heads, t, d = state.shape[1:]
    q = _heads(att.query(hidden), heads)  # (n, h, s, d)
    k_own, v_own = _heads(att.key(hidden), heads), _heads(att.value(hidden), heads)
    scale = d ** -0.5
    scores_own = (q @ k_own.transpose(-1, -2)) * scale
    scores_own = scores_own.masked_fill(~own[:, None], torch.finfo(scores_own.dtype).min)
    rows = q.transpose(0, 1).reshape(heads, n * s, d)  # every statement token of every statement, per head
    chunk_bias = torch.bmm(rows, age[0].transpose(1, 2))  # (h, n*s, chunks)
    scores_state = torch.bmm(rows, state[0].transpose(1, 2))
    scores_state = torch.cat([scores_state[..., a:b] + chunk_bias[..., j : j + 1] for j, (a, b) in enumerate(bounds)], -1) * scale
    scores_state = scores_state.view(heads, n, s, t).transpose(0, 1)
    probs = torch.cat([scores_own, scores_state], dim=-1).softmax(-1)
    if layer.training:
        probs = att.dropout(probs)
    p_state = probs[..., s:].transpose(0, 1).reshape(heads, n * s, t)
    mass = torch.stack([p_state[..., a:b].sum(-1) for a, b in bounds], -1)  # each chunk's share of attention
    ctx_state = torch.bmm(p_state, state[1]) + torch.bmm(mass, age[1])
    ctx = probs[..., :s] @ v_own + ctx_state.view(heads, n, s, d).transpose(0, 1)
    return _finish(layer, hidden, ctx)


class ChunkedStateEncoder(PairEncoder):
    """Features of (statement, state) pairs read through chunks of the whole state (module docstring).

    ``features`` takes what the classifier's other encoders take, (statement, state text) pairs, so
    the head, the temperature and the cue heads work unchanged; a state that is not an S1 state
    (a server's arbitrary text) is read as reasoning without a task.
    """

    windows_itself = True

    def __init__(self, backbone: Path, max_length: int, device: str | None = None, weights: dict | None = None,
                 precision: str | None = None, *, chunk_tokens: int = 256, reader: dict | None = None,
                 cache_chunks: int = 64) -> None:
        super().__init__(backbone, 512, device, weights, precision)
        self.max_length = max_length  # the whole state's budget; a chunk's positions stay within the backbone's
        if STATEMENT_ROOM + chunk_tokens + 1 > self.model.config.max_position_embeddings:
            raise ValueError(f"chunks of {chunk_tokens} tokens do not fit the backbone's positions")
        self.chunk_tokens = chunk_tokens
        config = self.model.config
        self.heads = config.num_attention_heads
        self.layers = self.model.encoder.layer
        for p in self.model.parameters():  # the state side is the frozen encoder it was built from
            p.requires_grad_(False)
        self.reader = nn.ModuleDict({
            "layers": copy.deepcopy(self.layers),
            "age": nn.ParameterList([nn.Parameter(torch.zeros(MAX_AGE, 2, config.hidden_size)) for _ in self.layers]),
        }).to(self.device)
        for p in self.reader.parameters():
            p.requires_grad_(True)
        if reader is not None:
            self.reader.load_state_dict(reader)
        self.reader.eval()
        self.cache = ChunkCache(cache_chunks)
        self._tokens = self.counter.encode
        self.special_tokens = 2 + 1  # a statement's [CLS] and [SEP]; each chunk's [SEP]

    def reserve(self, statement_tokens: int) -> int:
        return 0  # statements have their own positions: the state's budget does not depend on them

    def trainable(self) -> list[nn.Parameter]:
        return list(self.reader.parameters())

    def fast_parameters(self) -> list[nn.Parameter]:
        return list(self.reader["age"].parameters())

    def trained_state(self) -> dict[str, torch.Tensor]:
        return self.reader.state_dict()

    def load_trained_state(self, state: dict[str, torch.Tensor]) -> None:
        self.reader.load_state_dict(state)

    def train_mode(self, on: bool) -> None:
        self.reader.train(on)  # the state side stays in eval mode: frozen, and its encodings cacheable

    def tokenize(self, pairs: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
        return list(pairs)  # chunks are tokenised (and cached) as they are read

    def run(self, batch: Sequence[tuple[str, str]], grad: bool = False) -> torch.Tensor:
        return self.features(batch, grad)

    # -- the state side -------------------------------------------------------------------------

    def chunks_of(self, state: str) -> tuple[list[list[int]], list[int]]:
        """Token ids of the chunks a statement reads in this state, and each chunk's age."""
        parts = parse_state(state)
        task, reasoning = parts if parts is not None else (None, state)
        c = self.chunk_tokens
        task_chunks = []
        if task is not None:
            ids = self._tokens(PREFIX.format(task=task))
            task_chunks = [ids[i : i + c] for i in range(0, len(ids), c)]
            if len(task_chunks) > TASK_CHUNKS:
                task_chunks = [task_chunks[0], task_chunks[-1]]
        ids = self._tokens(reasoning)
        chunks = [ids[i : i + c] for i in range(0, len(ids), c)]
        room = self.max_length - sum(len(t) + 1 for t in task_chunks)  # each chunk is read with its [SEP]
        kept: list[list[int]] = []
        for chunk in reversed(chunks):  # newest first, whole chunks only
            room -= len(chunk) + 1
            if kept and room < 0:
                break
            kept.append(chunk)
        ages = [0] * len(task_chunks) + [min(MAX_AGE - 1, len(kept) - i) for i in range(len(kept))]
        return task_chunks + kept[::-1], ages

    def encode_chunks(self, chunks: Sequence[list[int]]) -> list[ChunkKV]:
        """Each chunk's per-layer keys and values, from the cache or encoded here (all misses in one batch)."""
        keys = [ChunkCache.key(c) for c in chunks]
        found = {k: item for k in dict.fromkeys(keys) if (item := self.cache.get(k)) is not None}
        missing = {k: c for k, c in zip(keys, chunks) if k not in found}  # each distinct chunk once
        if missing:
            encoded = self._encode([[*c, self.tok.sep_token_id] for c in missing.values()])
            for k, item in zip(missing, encoded):
                self.cache.put(k, item)
                found[k] = item
        return [found[k] for k in keys]

    @torch.no_grad()
    def _encode(self, rows: Sequence[list[int]]) -> list[ChunkKV]:
        ids, valid = _padded(rows, self.tok.pad_token_id, self.device)
        width = ids.shape[1]
        positions = (STATEMENT_ROOM + torch.arange(width, device=self.device)).expand(len(rows), -1)
        mask = (valid[:, None, None, :] | torch.eye(width, dtype=torch.bool, device=self.device)[None, None])
        with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.bf16):
            hidden = self.model.embeddings(input_ids=ids, token_type_ids=torch.ones_like(ids), position_ids=positions)
            kvs = []
            for layer in self.layers:
                keys, values = layer.attention.self.key(hidden), layer.attention.self.value(hidden)
                kvs.append(torch.stack([keys, values], 1).float())  # (rows, 2, width, hidden)
                hidden = _layer(layer, hidden, keys, values, mask, self.heads)
        stacked = torch.stack(kvs, 1)  # (rows, layers, 2, width, hidden)
        stacked = stacked.view(*stacked.shape[:4], self.heads, -1).transpose(3, 4)  # (rows, layers, 2, heads, width, d)
        return [ChunkKV(stacked[i, :, :, :, : len(r)].contiguous()) for i, r in enumerate(rows)]

    # -- the statement side ---------------------------------------------------------------------

    def read(self, statements: Sequence[list[int]], chunks: Sequence[ChunkKV], ages: Sequence[int]) -> torch.Tensor:
        """Features of each statement over one state's chunks: the mean and the first token of the
        statement's last layer, as the head was trained on."""
        tok = self.tok
        rows = [[tok.cls_token_id, *s[: STATEMENT_ROOM - 2], tok.sep_token_id] for s in statements]
        ids, valid = _padded(rows, tok.pad_token_id, self.device)
        n, width = ids.shape
        state = torch.cat([c.kv for c in chunks], dim=3).to(self.device)  # (layers, 2, heads, T, head size)
        ends = torch.tensor([c.tokens for c in chunks]).cumsum(0).tolist()
        bounds = list(zip([0, *ends[:-1]], ends))
        age = torch.tensor(list(ages), device=self.device)
        own = valid[:, None, :].expand(n, width, width) | torch.eye(width, dtype=torch.bool, device=self.device)
        with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.bf16):
            hidden = self.model.embeddings(input_ids=ids, token_type_ids=torch.zeros_like(ids),
                                           position_ids=torch.arange(width, device=self.device).expand(n, -1))
            for layer, kv, age_emb in zip(self.reader["layers"], state, self.reader["age"]):
                shift = age_emb[age].view(len(chunks), 2, self.heads, -1).permute(1, 2, 0, 3)  # (2, h, chunks, d)
                dtype = hidden.dtype
                hidden = _reader_layer(layer, hidden, own, kv.to(dtype), shift.to(dtype), bounds)
        hidden = hidden.float()
        weights = valid.float().unsqueeze(-1)
        mean = (hidden * weights).sum(1) / weights.sum(1)
        return torch.cat([mean, hidden[:, 0]], dim=-1)

    def features(self, pairs: Sequence[tuple[str, str]], grad: bool = False) -> torch.Tensor:
        """Features in pair order; each state's chunks are found (or encoded) once for all its statements."""
        order: dict[str, list[int]] = {}
        for i, (_, state) in enumerate(pairs):
            order.setdefault(state, []).append(i)
        windows = {state: self.chunks_of(state) for state in order}
        encoded = self.encode_chunks([c for chunks, _ in windows.values() for c in chunks])
        out: list[torch.Tensor | None] = [None] * len(pairs)
        at = 0
        with torch.set_grad_enabled(grad):
            for state, idx in order.items():
                chunks, ages = windows[state]
                feats = self.read([self._tokens(pairs[i][0]) for i in idx], encoded[at : at + len(chunks)], ages)
                at += len(chunks)
                for j, i in enumerate(idx):
                    out[i] = feats[j]
        return torch.stack(out)  # type: ignore[arg-type]
