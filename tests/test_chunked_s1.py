"""Whole-state reading (``soma_local.s1.chunked``): chunks read as shared reading reads a state, reused by
content across scans, windowed by whole chunks aligned to the reasoning's start."""

from __future__ import annotations

import pytest
import torch
from transformers import BertConfig
from transformers.models.bert.modeling_bert import BertLayer

from soma_local.s1.chunked import MAX_AGE, ChunkedStateEncoder, ChunkCache, _reader_layer
from soma_local.s1.classifier import SharedStateEncoder
from soma_local.s1.model_folders import read_config, read_encoder_weights, resolve_backbone, resolve_s1_model
from soma_local.s1.state import format_state

LINE = "Each box holds 12 apples, so 3 boxes hold 3 * 12 = 36 apples; 36 - 5 = 31 are left.\n"


@pytest.fixture(scope="module")
def weights():
    folder = resolve_s1_model("minilm-statements")
    config = read_config(folder)
    return resolve_backbone(config.backbone), read_encoder_weights(folder, config)


def chunked(weights, chunk_tokens: int = 64, max_length: int = 2048, cache: int = 64) -> ChunkedStateEncoder:
    return ChunkedStateEncoder(*weights[:1], max_length, "cpu", weights[1], "float32", chunk_tokens=chunk_tokens,
                               cache_chunks=cache)


def test_one_chunk_reads_exactly_as_shared_reading_does(weights):
    torch.set_num_threads(1)
    shared = SharedStateEncoder(weights[0], 384, "cpu", weights[1], "float32")
    reader = chunked(weights, chunk_tokens=300)
    text = LINE * 3  # not an S1 state: read as reasoning alone, one chunk
    pairs = [("The reasoning is re-checking an answer.", text), ("The reasoning has stated a final answer.", text)]
    assert torch.allclose(shared.features(pairs), reader.features(pairs), atol=1e-4)


def test_a_later_scan_reuses_every_chunk_but_the_newest(weights):
    reader = chunked(weights)
    statements = ["Is the reasoning going in circles?", "The reasoning restated the task."]
    task = "A farmer has 3 boxes of 12 apples and eats 5. How many are left?"
    first = format_state(task, LINE * 12)
    reader.features([(s, first) for s in statements])
    encoded = reader.cache.misses
    second = format_state(task, LINE * 13)
    warm = reader.features([(s, second) for s in statements])
    assert reader.cache.misses - encoded <= 2  # the grown partial chunk and any new one
    assert reader.cache.hits >= len(reader.chunks_of(second)[0]) - 2
    cold = chunked(weights).features([(s, second) for s in statements])
    assert torch.allclose(warm, cold, atol=1e-5)  # reuse changes nothing


def test_the_window_slides_by_whole_chunks_aligned_to_the_reasoning(weights):
    reader = chunked(weights, chunk_tokens=64, max_length=400)
    task = "How many apples are left?"
    short_chunks, ages = reader.chunks_of(format_state(task, LINE * 4))
    long_chunks, long_ages = reader.chunks_of(format_state(task, LINE * 40))
    assert ages[0] == 0 and ages[1:] == sorted(ages[1:], reverse=True) and ages[-1] == 1  # task, then oldest to newest
    assert sum(len(c) + 1 for c in long_chunks) <= 400
    everything = reader.counter.encode(LINE * 40)
    body = [t for c in long_chunks[1:] for t in c]
    assert everything[len(everything) - len(body):] == body  # the newest tokens, whole chunks
    assert (len(everything) - len(body)) % 64 == 0  # chunks start where the reasoning's 64-token chunks start
    assert max(long_ages) < MAX_AGE


def test_age_vectors_enter_as_if_added_to_every_key_and_value():
    torch.manual_seed(0)
    layer = BertLayer(BertConfig(hidden_size=64, num_attention_heads=4, intermediate_size=128)).eval()
    hidden, own = torch.randn(2, 5, 64), torch.ones(2, 5, 5, dtype=torch.bool)
    state, age = torch.randn(2, 4, 7, 16), torch.randn(2, 4, 3, 16)
    bounds, chunk_of = [(0, 2), (2, 5), (5, 7)], torch.tensor([0, 0, 1, 1, 1, 2, 2])
    fast = _reader_layer(layer, hidden, own, state, age, bounds)
    plain = _reader_layer(layer, hidden, own, state + age[:, :, chunk_of], torch.zeros_like(age), bounds)
    assert torch.allclose(fast, plain, atol=1e-5)


def test_the_cache_is_bounded_and_keyed_by_content():
    cache = ChunkCache(capacity=2)
    for ids in ([1, 2], [3, 4], [5, 6]):
        cache.put(ChunkCache.key(ids), object())
    assert ChunkCache.key([1, 2]) != ChunkCache.key([2, 1])
    assert len(cache) == 2 and cache.get(ChunkCache.key([1, 2])) is None and cache.get(ChunkCache.key([5, 6])) is not None


def test_a_chunked_folder_loads_as_a_classifier_and_reads_the_whole_reasoning(tmp_path):
    from argparse import Namespace

    from soma_local.s1.base import S1Query
    from soma_local.s1.classifier import ClassifierS1
    from training.s1.whole_state import build, ship

    args = Namespace(init="minilm-statements", max_length=2048, chunk_tokens=128, device="cpu", precision="float32")
    encoder, head, config, folder = build(args)
    out = tmp_path / "whole"
    ship(out, encoder, head, config, folder, args)
    s1 = ClassifierS1(out, device="cpu", precision="float32")
    assert s1.encoder.windows_itself and s1.input_limit == 2048
    task, reasoning = "How many apples are left?", "The task restated: 3 boxes of 12, 5 eaten.\n" + LINE * 30
    assert s1.state_for(task, reasoning, ["x"]).endswith(reasoning)  # the encoder windows it, by whole chunks
    first = s1.score([S1Query("Is the reasoning going in circles?", task, reasoning)])[0]
    assert 0.0 < first < 1.0 and len(s1.encoder.cache) > 0
    assert s1.version != ClassifierS1("minilm-statements", device="cpu", precision="float32").version


def test_a_shipped_whole_state_folder_is_the_start_of_a_further_stage(tmp_path):
    from argparse import Namespace

    from soma_local.errors import ModelFileError
    from training.s1.whole_state import build, ship

    args = Namespace(init="minilm-statements", max_length=2048, chunk_tokens=128, device="cpu", precision="float32")
    encoder, head, config, folder = build(args)
    with torch.no_grad():  # as if trained: the next stage must start from these, not from zero
        encoder.reader["age"][0][1].fill_(0.25)
        head.net[1].bias.fill_(0.5)
    first = tmp_path / "first"
    ship(first, encoder, head, config, folder, args)

    again, again_head, again_config, again_folder = build(Namespace(**{**vars(args), "init": str(first)}))
    assert torch.all(again.reader["age"][0][1] == 0.25) and again_head.net[1].bias.item() == 0.5
    for (name, a), b in zip(again.reader.state_dict().items(), encoder.reader.state_dict().values()):
        assert torch.allclose(a, b, atol=2e-3), name  # shipped in half precision
    second = tmp_path / "second"
    shipped = ship(second, again, again_head, again_config, again_folder, args)
    assert (second / shipped.encoder_weights).resolve() == (folder / config.encoder_weights).resolve()  # still shared
    with pytest.raises(ModelFileError, match="chunks of 128"):
        build(Namespace(**{**vars(args), "init": str(first), "chunk_tokens": 256}))
