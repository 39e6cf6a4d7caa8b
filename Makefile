# Two commands do all setup on a fresh clone:  `make demo`  and  `make test`.
PY := .venv/bin/python
DATA_DIR ?= $(abspath ../shared/datasets)

.PHONY: setup demo test
setup:
	@bash scripts/setup.sh

# The demo's S2: the embedded SmolLM2 (small enough to loop, which the looping monitor describes), or
# the opt-in Qwen2.5-0.5B when SOMA_EXTRA_MODELS names it (setup installs it then).
DEMO_S2 := $(if $(findstring qwen2.5-0.5b,$(SOMA_EXTRA_MODELS)),qwen2.5-0.5b,smollm2-135m)

# The S1 in float32 on every CPU: bfloat16, which it picks by itself on AVX512-BF16 and AMX CPUs, moves
# p by about 0.001, enough to change a printed p between two machines (docs/cpu-builds.md).
demo: setup
	SOMA_S1_PRECISION=float32 $(PY) -m soma_local.cli run --s2-model $(DEMO_S2) --scan-interval 128 --max-tokens 2048 \
		--monitor overthinking --monitor unanswerable --monitor looping

test: setup
	SOMA_DATA_DIR=$(DATA_DIR) $(PY) -m pytest -q tests
