"""Write a random-weight GGUF of a real model's shape, for TIMING ONLY.

Decode speed depends on the shapes, the quantisation and the vocabulary, not on trained weights, so a
GGUF with Qwen3's shapes and a real Qwen tokenizer measures our loop's overhead at 8B scale on a GPU
machine that cannot download Qwen3-8B. Its text is noise. The tokenizer comes from a vocabulary-only
GGUF (llama.cpp ships them under models/ggml-vocab-*.gguf); two padding ids become ``<think>`` and
``</think>`` (ids 151667/151668, as in Qwen3) and the chat template opens a thinking block, so the
native-thinking path is exercised too.

  python -m benchmarks.random_gguf --vocab ggml-vocab-qwen2.gguf --shape qwen3-8b --out r8b.gguf

Needs the ``gguf`` package (llama.cpp's gguf-py).
"""

from __future__ import annotations

import argparse

import numpy as np

SHAPES = {
    # layers, hidden, heads, kv heads, head dim, ffn
    "tiny": (2, 64, 4, 2, 16, 128),
    "qwen3-0.6b": (28, 1024, 16, 8, 128, 3072),
    "qwen3-8b": (36, 4096, 32, 8, 128, 12288),
}
THINK_IDS = {151667: "<think>", 151668: "</think>"}
TEMPLATE = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
    "'<|im_end|>\\n'}}{% endfor %}{% if add_generation_prompt %}{{'<|im_start|>assistant\\n<think>\\n'}}"
    "{% endif %}"
)


def main() -> None:
    ap = argparse.ArgumentParser(
        prog="python -m benchmarks.random_gguf", description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--vocab", required=True, help="a Qwen2-family vocabulary-only GGUF")
    ap.add_argument("--shape", choices=SHAPES, default="qwen3-0.6b")
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    import gguf  # llama.cpp's gguf-py, on PYTHONPATH only where GGUFs are written (after --help)

    layers, hidden, heads, kv, hd, ffn = SHAPES[args.shape]

    reader = gguf.GGUFReader(args.vocab)
    field = lambda k: reader.fields[k]
    tokens = [bytes(field("tokenizer.ggml.tokens").parts[i]).decode() for i in field("tokenizer.ggml.tokens").data]
    types = [int(field("tokenizer.ggml.token_type").parts[i][0]) for i in field("tokenizer.ggml.token_type").data]
    merges = [bytes(field("tokenizer.ggml.merges").parts[i]).decode() for i in field("tokenizer.ggml.merges").data]
    for i, text in THINK_IDS.items():
        tokens[i], types[i] = text, gguf.TokenType.USER_DEFINED
    vocab = len(tokens)

    w = gguf.GGUFWriter(args.out, "qwen3")
    w.add_name(f"random-{args.shape} (timing only)")
    w.add_block_count(layers)
    w.add_context_length(40960)
    w.add_embedding_length(hidden)
    w.add_feed_forward_length(ffn)
    w.add_head_count(heads)
    w.add_head_count_kv(kv)
    w.add_key_length(hd)
    w.add_value_length(hd)
    w.add_rope_freq_base(1_000_000.0)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(field("tokenizer.ggml.pre").contents())
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(151643)
    w.add_eos_token_id(151645)
    w.add_pad_token_id(151643)
    w.add_add_bos_token(False)
    w.add_chat_template(TEMPLATE)

    # One random buffer, viewed per tensor: writing, not sampling, should dominate.
    rng = np.random.default_rng(args.seed)
    base = (rng.standard_normal(vocab * hidden, dtype=np.float32) * 0.02).astype(np.float16)
    mat = lambda rows, cols: base[: rows * cols].reshape(rows, cols)
    ones = lambda n: np.ones(n, dtype=np.float32)
    w.add_tensor("token_embd.weight", mat(vocab, hidden))
    w.add_tensor("output.weight", mat(vocab, hidden))
    w.add_tensor("output_norm.weight", ones(hidden))
    for b in range(layers):
        p = f"blk.{b}."
        w.add_tensor(p + "attn_norm.weight", ones(hidden))
        w.add_tensor(p + "attn_q.weight", mat(heads * hd, hidden))
        w.add_tensor(p + "attn_k.weight", mat(kv * hd, hidden))
        w.add_tensor(p + "attn_v.weight", mat(kv * hd, hidden))
        w.add_tensor(p + "attn_output.weight", mat(hidden, heads * hd))
        w.add_tensor(p + "attn_q_norm.weight", ones(hd))
        w.add_tensor(p + "attn_k_norm.weight", ones(hd))
        w.add_tensor(p + "ffn_norm.weight", ones(hidden))
        w.add_tensor(p + "ffn_gate.weight", mat(ffn, hidden))
        w.add_tensor(p + "ffn_up.weight", mat(ffn, hidden))
        w.add_tensor(p + "ffn_down.weight", mat(hidden, ffn))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file(progress=False)
    w.close()
    print(f"wrote {args.out}: {args.shape}, vocab {vocab}")


if __name__ == "__main__":
    main()
