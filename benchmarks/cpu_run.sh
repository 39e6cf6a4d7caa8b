#!/usr/bin/env bash
# The small real CPU run committed under benchmarks/results/ (embedded SmolLM2-135M S2, readout S1 on
# the same model). Two processes, one per scenario; each is resumable: rerun this script to continue.
# Short limits so it fits 2 shared CPU cores: --max-tokens 512 --scan-interval 128 (not the paper's
# 32,768 and 256).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
OUT=${OUT:-benchmarks/results/cpu}
N_TEST=${N_TEST:-6}
N_CAL=${N_CAL:-4}
N_SES=${N_SES:-12}
COMMON=(--out "$OUT" --s1 readout --threads 1 --n-ctx 4096 --max-tokens 512 --scan-interval 128)
bench() { $PY -m soma_local.cli bench run "${COMMON[@]}" "$@"; }

overthinking() {
  bench --benchmark calib_over_easy --limit "$N_CAL" --method vanilla --method soma \
        --method budget_forcing --method dynasor --budgets 64 128 192 256 --dynasor-interval 64
  bench --benchmark gsm8k --limit "$N_TEST" --method vanilla --method soma --method no_reminder \
        --method budget_forcing --method deer --method dynasor --budgets 64 128 192 256 --dynasor-interval 64
}
unanswerable() {
  bench --benchmark calib_unans_easy --limit "$N_CAL" --method vanilla --method soma --method dynasor \
        --dynasor-interval 64
  bench --benchmark umwp --limit "$N_TEST" --method vanilla --method soma --method no_reminder --method deer \
        --method dynasor --method abstention_prompt --dynasor-interval 64
  # SES is fitted on vanilla runs of answerable calibration questions; SmolLM2 rarely writes an
  # uncertainty keyword, so it needs more of them than the other calibrations.
  bench --benchmark calib_unans_easy --limit "$N_SES" --method vanilla
  bench --benchmark umwp --limit "$N_TEST" --method ses
}
overthinking > "$OUT.overthinking.log" 2>&1 &
unanswerable > "$OUT.unanswerable.log" 2>&1 &
wait
$PY -m soma_local.cli bench report "$OUT/smollm2-135m"
