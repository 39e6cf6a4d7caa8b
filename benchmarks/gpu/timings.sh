#!/usr/bin/env bash
# GPU timings on a CUDA machine with no network: build llama-cpp-python for CUDA from a carried source
# archive (library only, one architecture), write random-weight Qwen3-shaped GGUFs and time our decode
# loop against llama.cpp's eval time and create_completion. Run from the repo root:
#   LLAMA_SRC=path/to/llama_cpp_python-0.3.36.tar.gz WHEELS=dir/of/py-wheels OUT=results bash benchmarks/gpu/timings.sh
# WHEELS holds what the machine lacks (pydantic, pydantic-core, annotated-types, typing-inspection,
# diskcache). Trim the source archive (.git, docs, examples, vocab GGUFs other than qwen2) to carry less.
export PYTHONUNBUFFERED=1
REPO=$(pwd)
OUT=${OUT:-$REPO/gpu-results}; mkdir -p "$OUT"
T0=$(date +%s)
SCRATCH=${SCRATCH:-$(mktemp -d)}  # wheels, the llama.cpp build and the random GGUFs
el() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target $SCRATCH/site ${WHEELS:?}/*.whl || exit 1
export PYTHONPATH=$SCRATCH/site:$REPO
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee $OUT/gpu.txt
nproc; python3 --version; nvcc --version | tail -1
cd "$SCRATCH" && tar xzf "$(realpath "${LLAMA_SRC:?}")" && cd llama_cpp_python-0.3.36 || exit 1
el build start
# FlashAttention kernels are left out to keep the build inside a short lease; drop -DGGML_CUDA_FA=OFF
# (and pass --flash-attn below) where build time does not matter.
export CMAKE_ARGS="-DGGML_CUDA=on -DCMAKE_CUDA_ARCHITECTURES=${CUDA_ARCH:-90} -DGGML_CUDA_FA=OFF -DGGML_CUDA_NCCL=OFF -DLLAVA_BUILD=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_CURL=OFF"
CMAKE_BUILD_PARALLEL_LEVEL=16 timeout 420 python3 -m pip install --no-deps --no-build-isolation --no-index --target $SCRATCH/site . > $OUT/build.log 2>&1
echo "build rc=$?"; tail -3 $OUT/build.log
el build end
cd $REPO
python3 -c "import llama_cpp; print('gpu offload', llama_cpp.llama_supports_gpu_offload())" || exit 1
VOCAB=$SCRATCH/llama_cpp_python-0.3.36/vendor/llama.cpp/models/ggml-vocab-qwen2.gguf
GG=$SCRATCH/llama_cpp_python-0.3.36/vendor/llama.cpp/gguf-py
PYTHONPATH=$PYTHONPATH:$GG python3 -m benchmarks.random_gguf --vocab $VOCAB --shape qwen3-0.6b --out $SCRATCH/r06.gguf
el gen06
timeout 90 python3 -m benchmarks.s2_speed --model $SCRATCH/r06.gguf --n-gpu-layers -1 --top-k 20 --tokens 512 --prompts 4 --s1 readout:$SCRATCH/r06.gguf --scan-interval 256 2>&1 | tee $OUT/speed_06_gpu.txt
el bench06
PYTHONPATH=$PYTHONPATH:$GG timeout 120 python3 -m benchmarks.random_gguf --vocab $VOCAB --shape qwen3-8b --out $SCRATCH/r8b.gguf
el gen8b
timeout 120 python3 -m benchmarks.s2_speed --model $SCRATCH/r8b.gguf --n-gpu-layers -1 --top-k 20 --tokens 512 --prompts 3 --s1 none 2>&1 | tee $OUT/speed_8b_gpu.txt
el bench8b
timeout 60 python3 -m benchmarks.s2_speed --model $SCRATCH/r06.gguf --n-gpu-layers 0 --threads 2 --top-k 20 --tokens 64 --prompts 2 --s1 none 2>&1 | tee $OUT/speed_06_cpu2.txt
el done
