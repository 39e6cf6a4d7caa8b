"""Convert a GGUF to a Hugging Face bf16 folder that vLLM loads (run with .venv-vllm's python).

vLLM 0.32 does not read GGUF; transformers dequantizes one (with the ``gguf`` package) into a
normal model. Written to a temporary folder and renamed, so a killed run never leaves a half folder
that later runs would take for done.

    python scripts/gguf_to_hf.py MODEL.gguf OUT_DIR
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path


def convert(gguf: Path, out: Path) -> None:
    if (out / "config.json").is_file():
        return
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.bfloat16)
    # The weights are dequantized, but the model still says it came from a GGUF, which
    # save_pretrained refuses: forget that, and it saves as the plain bf16 model it now is.
    model.hf_quantizer = None
    model.config.__dict__.pop("quantization_config", None)
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    tmp.replace(out)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: gguf_to_hf.py MODEL.gguf OUT_DIR")
    convert(Path(sys.argv[1]), Path(sys.argv[2]))
