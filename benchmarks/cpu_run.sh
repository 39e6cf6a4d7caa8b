#!/usr/bin/env bash
# The small real CPU run in benchmarks/results/cpu: an embedded S2 (default SmolLM2-135M; S2=qwen2.5-0.5b
# for the opt-in Qwen2.5-Coder-0.5B) and the classifier S1 the committed files were made with (minilm-reader;
# S1=classifier for the default, minilm-statements, into another OUT), every method. Two processes, one
# per scenario, one thread each; every step is resumable, so rerunning this script continues a killed
# run. Short limits so it fits 2 CPU cores: --max-tokens 512 --scan-interval 128 (paper: 32,768, 256).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
OUT=${OUT:-benchmarks/results/cpu}
S2=${S2:-smollm2-135m}
N_TEST=${N_TEST:-30}
N_CAL=${N_CAL:-10}
N_SES=${N_SES:-40}
S1=${S1:-classifier:minilm-reader}
COMMON=(--out "$OUT" --s2-model "$S2" --s1 "$S1" --threads 1 --n-ctx 4096 --max-tokens 512 --scan-interval 128)
bench() { $PY -m soma_local.cli bench run "${COMMON[@]}" "$@"; }

overthinking() {
  bench --benchmark calib_over_easy --limit "$N_CAL" --method vanilla --method soma --method no_reminder \
        --method budget_forcing --method dynasor --budgets 64 128 192 256 --dynasor-interval 64
  bench --benchmark gsm8k --limit "$N_TEST" --method vanilla --method soma --method no_reminder \
        --method budget_forcing --method deer --method dynasor --budgets 64 128 192 256 --dynasor-interval 64
}
unanswerable() {
  bench --benchmark calib_unans_easy --limit "$N_CAL" --method vanilla --method soma --method no_reminder \
        --method dynasor --dynasor-interval 64
  bench --benchmark umwp --limit "$N_TEST" --method vanilla --method soma --method no_reminder --method deer \
        --method dynasor --method abstention_prompt --dynasor-interval 64
  # SES: fitted on vanilla runs of answerable calibration questions; SmolLM2 rarely writes a
  # keyword, so more of them (under two arrivals: --ses-rule conformal).
  bench --benchmark calib_unans_easy --limit "$N_SES" --method vanilla
  bench --benchmark umwp --limit "$N_TEST" --method ses --ses-rule parametric
}
overthinking > "$OUT.$S2.overthinking.log" 2>&1 & over=$!
unanswerable > "$OUT.$S2.unanswerable.log" 2>&1 & unans=$!
# A bare `wait` returns 0 whatever the scenarios did; wait for each and keep the old tables if one failed.
failed=0
wait "$over" || { echo "overthinking failed: see $OUT.$S2.overthinking.log" >&2; failed=1; }
wait "$unans" || { echo "unanswerable failed: see $OUT.$S2.unanswerable.log" >&2; failed=1; }
[ "$failed" = 0 ] || exit 1
$PY -m soma_local.cli bench report "$OUT"
