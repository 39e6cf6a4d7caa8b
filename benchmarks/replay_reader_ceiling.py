"""What a reader-faithful S1 could do in replay: the LLM reader's own labels in place of S1's p.

    python -m benchmarks.replay_reader_ceiling                       # the committed labels, the shipped replay
    python -m benchmarks.replay_reader_ceiling batches --model Qwen3-8B --dataset umwp --prefix o
    python -m benchmarks.replay_reader_ceiling batches --model Qwen3-8B --dataset sum --half calibration --prefix s

A replay result file (``soma replay --calibrate-share ...``) holds every trace's pauses, vanilla
outcome and S1 probabilities. The label file gives a reader's p (``LABELLING.md``, the gold rubric) for
the state at some of those pauses. Where every pause of a trace is labelled, the reader stands in for
S1; h is calibrated per S2 on the replay's own calibration half (every dataset of that S2, as replay
does it), and both S1s are reported on the labelled test halves, side by side and at every h.

Only the traces a takeover can change need labels: where vanilla already abstained, an abstaining
takeover changes no outcome, so those traces keep vanilla's result under both S1s (their tokens are
then vanilla's too, which is why this script reports no token figures). The reader is judged on the
same pauses and the same controller as S1, so the gap between the two tables is S1's to close, and
what the reader's table lacks is the monitor statement's (or the controller's) to answer for.

``batches`` writes what a reader labels: every pause of those traces, formatted as gold formats a state
(``training.states.reader_set.render_state``), in files of 100 holding only sid, monitor and state, plus a
reference file (dataset, model, question_id, half, pause, cut_char) to join the labels back. These
questions are replay's, never the S1's training half: the labels measure, they must never train.
"""

from __future__ import annotations

import argparse
import json
import math
import random
from collections import defaultdict
from pathlib import Path

import numpy as np

from soma_local.calibration.metrics import ItemResult, Metrics, summarize
from soma_local.calibration.recorded import load_all
from soma_local.calibration.replay import ScannedTrace, replay_item
from soma_local.calibration.report import pct
from soma_local.calibration.thresholds import H_GRID, Objective, choose_threshold
from soma_local.data_dir import data_dir
from soma_local.engine.pauses import PauseRule, pause_cuts
from soma_local.errors import DataError
from soma_local.s1.temperature import auroc
from soma_local.s2.model_files import GgufVocab, resolve_gguf
from training.labels.readers import StateLabel, agreement, read_labels
from training.states.reader_set import render_state, short_model, trace_key, write_jsonl

HERE = Path(__file__).resolve().parent
LABELS = HERE / "data" / "replay_reader_labels.jsonl"
RESULTS = HERE / "results" / "replay_classifier_calibrated" / "replay_results.json"


def reader_traces(traces: list[ScannedTrace], labels: list[dict], held: set[str]) -> dict[tuple[str, str, str], ScannedTrace]:
    """Each trace of a labelled (dataset, model, half) with the reader's p at its pauses. A trace is
    labelled at every pause or not at all, and only one vanilla already abstained on may go unlabelled."""
    by_trace: dict[tuple[str, str, str], dict[int, float]] = defaultdict(dict)
    for row in labels:
        by_trace[trace_key(row["dataset"], row["model"], row["question_id"])][row["pause"]] = row["p"]
    cells = {(r["dataset"], short_model(r["model"]), r["half"]) for r in labels}
    out = {}
    for t in traces:
        key = trace_key(t.dataset, t.model, t.id)
        if (*key[:2], half_of(t.id, held)) not in cells:
            continue
        ps = by_trace.get(key)
        if ps is None:
            if t.probs and not t.vanilla.abstained:  # (a trace with no pause has nothing to label)
                raise DataError(f"{key}: unlabelled, and a takeover would change its outcome")
            out[key] = t.model_copy(update={"probs": [None] * len(t.probs)})
        elif sorted(ps) != list(range(len(t.probs))):
            raise DataError(f"{key}: labels at pauses {sorted(ps)}, the trace has {len(t.probs)}")
        else:
            out[key] = t.model_copy(update={"probs": [ps[i] for i in range(len(t.probs))]})
    return out


def half_of(qid: str, held: set[str]) -> str:
    return "calibration" if qid in held else "test"


def outcomes(items: list[ScannedTrace]) -> dict[float, list[ItemResult]]:
    return {h: [replay_item(t, h, abstaining_takeover=True) for t in items] for h in (*H_GRID, math.inf)}


def grid(items: list[ScannedTrace]) -> dict[float, Metrics]:
    return {h: summarize(out) for h, out in outcomes(items).items()}


def cells(m: Metrics, vanilla: Metrics) -> str:
    """Acc, Abs and FA in %, with Abs and FA's change against vanilla in points."""
    d_abs = 100 * ((m.abstention or 0) - (vanilla.abstention or 0))
    d_fa = 100 * ((m.false_abstention or 0) - (vanilla.false_abstention or 0))
    return f"{pct(m.accuracy):>5}  {pct(m.abstention):>5} ({d_abs:+5.1f})  {pct(m.false_abstention):>5} ({d_fa:+4.1f})"


def write_batches(results: dict, model: str, datasets: list[str], halves: list[str], out: Path, tokenizer: str | None,
                  prefix: str, batch_size: int = 100) -> int:
    """The states at every pause of the chosen traces whose outcome a takeover can change."""
    held = set(results["calibration_ids"])
    recorded = {trace_key(t.dataset, t.model, t.question_id): t for t in load_all(data_dir())}
    gguf = resolve_gguf(tokenizer)
    if gguf.name != results["tokenizer"]:
        raise DataError(f"the replay counted tokens with {results['tokenizer']}, not {gguf.name}: pass --tokenizer")
    vocab = GgufVocab.from_path(gguf)
    rule = PauseRule(results["scan_interval"])
    refs = []
    for t in (ScannedTrace(**t) for t in results["traces"]):
        key = trace_key(t.dataset, t.model, t.id)
        if key[1] != model or key[0] not in datasets or half_of(t.id, held) not in halves or t.vanilla.abstained:
            continue
        trace = recorded[key]
        ends = [len(cut) for cut in pause_cuts(trace.thinking, vocab.pieces(trace.thinking), rule)[1]]
        if len(ends) != len(t.probs):
            raise DataError(f"{key}: {len(ends)} pauses here, {len(t.probs)} in the replay (another tokenizer or rule?)")
        start = trace.thinking_start
        refs += [{"dataset": key[0], "model": model, "question_id": t.id, "answerable": t.answerable,
                  "half": half_of(t.id, held), "pause": i, "cut_char": start + end,
                  "monitor": results["monitor"]} for i, end in enumerate(ends)]
    random.Random(0).shuffle(refs)  # a batch mixes traces and halves, and no trace is read in order
    refs = [{"sid": f"{prefix}{i:05d}", **r} for i, r in enumerate(refs)]
    out.mkdir(parents=True, exist_ok=True)
    write_jsonl(out / "refs.jsonl", refs)
    for n in range(0, len(refs), batch_size):
        write_jsonl(out / f"{prefix.upper()}{n // batch_size + 1:03d}.jsonl",
                    ({"sid": r["sid"], "monitor": r["monitor"],
                      "state": render_state(recorded[trace_key(r["dataset"], model, r["question_id"])], r["cut_char"])}
                     for r in refs[n : n + batch_size]))
    print(f"{len(refs)} states of {len({r['question_id'] for r in refs})} traces -> {out}")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m benchmarks.replay_reader_ceiling", description=__doc__.split("\n\n")[0]
    )
    ap.add_argument("command", nargs="?", choices=("report", "batches"), default="report")
    ap.add_argument("--labels", type=Path, default=LABELS)
    ap.add_argument("--results", type=Path, default=RESULTS)
    ap.add_argument("--model", default="Qwen3-8B", help="batches: the S2 whose traces to label")
    ap.add_argument("--dataset", action="append", help="batches: a dataset to label (default: all)")
    ap.add_argument("--half", action="append", choices=("calibration", "test"), help="batches: default both")
    ap.add_argument("--prefix", default="c", help="batches: sid prefix, so label files of several draws can be joined")
    ap.add_argument("--out", type=Path, default=Path("runs/reader_ceiling"), help="batches: where to write")
    ap.add_argument("--tokenizer", help="batches: the GGUF whose tokenizer the replay used (default: the embedded S2)")
    args = ap.parse_args(argv)

    results = json.loads(args.results.read_text(encoding="utf-8"))
    if args.command == "batches":
        datasets = args.dataset or sorted({t["dataset"] for t in results["traces"]})
        return write_batches(results, args.model, datasets, args.half or ["calibration", "test"], args.out,
                             args.tokenizer, args.prefix)
    rows = [json.loads(line) for line in args.labels.read_text(encoding="utf-8").splitlines() if line.strip()]
    labels = [r for r in rows if r["pass"] == 1]  # one reader per state; pass 2 only measures the reader
    doubles = agreement(read_labels(StateLabel, args.labels)).get("all")
    if doubles:
        print(f"reader vs reader on {doubles['n']} doubly labelled states: AUROC {doubles['auroc_second_vs_first']:.3f}, "
              f"binary agreement {doubles['binary_agreement']:.1%}, kappa {doubles['cohen_kappa']:.3f}")
    s1_traces = [ScannedTrace(**t) for t in results["traces"]]
    held = set(results["calibration_ids"])
    by_reader = reader_traces(s1_traces, labels, held)
    s1_by_key = {trace_key(t.dataset, t.model, t.id): t for t in s1_traces}
    objective = Objective(kind="abstention")
    labelled = {trace_key(r["dataset"], r["model"], r["question_id"]) for r in labels}
    print(f"# {args.labels.name}: {len(labels)} reader labels over {len(labelled)} traces; replay "
          f"{args.results.parent.name} (S1 {results['s1']} {results.get('s1_version', '')})")

    def s1_vs_reader(subset: list[dict]) -> tuple[int, float, float]:
        """How S1 ranks these labelled pauses against the reader: n, reader's positive share, AUROC."""
        pairs = [(r["p"] >= 0.5, s1_by_key[trace_key(r["dataset"], r["model"], r["question_id"])].probs[r["pause"]])
                 for r in subset]
        ys, ps = (np.array(v, dtype=float) for v in zip(*[(y, p) for y, p in pairs if p is not None]))
        return len(ys), float(ys.mean()), auroc(ps, ys)

    for half in ("calibration", "test"):
        if subset := [r for r in labels if r["half"] == half]:
            n, positive, area = s1_vs_reader(subset)
            print(f"S1 vs reader on the {half} half's labelled pauses: n = {n}, reader positive {positive:.1%}, AUROC {area:.3f}")
    # Per batch (second passes too): a batch labelled against the wrong states would sit near 0.5.
    batches = sorted({r["batch"] for r in rows})
    print("S1 vs reader AUROC per batch: " + ", ".join(
        f"{b} {s1_vs_reader([r for r in rows if r['batch'] == b])[2]:.2f}" for b in batches))

    for model in sorted({k[1] for k in by_reader}):
        # h per S2, on the calibration half of every dataset, as replay chooses it; the reader can stand in
        # only if all of that S2's calibration traces are covered.
        cal_keys = [trace_key(t.dataset, t.model, t.id) for t in s1_traces if short_model(t.model) == model and t.id in held]
        missing = sorted({k[0] for k in cal_keys if k not in by_reader})
        if missing:
            raise DataError(f"{model}: no reader labels for the calibration traces of {', '.join(missing)}")
        chosen = {}
        print(f"\n== {model}: h calibrated on {len(cal_keys)} traces [{objective.describe()}]")
        for name, source in (("S1", s1_by_key), ("reader", by_reader)):
            choice = choose_threshold(outcomes([source[k] for k in cal_keys]), objective)
            chosen[name] = choice.threshold
            note = choice.refused()
            print(f"{name}: h = {choice.threshold:g}; {choice.evidence()}" + (f"; {note}" if note else ""))
        for dataset in sorted({k[0] for k in by_reader if k[1] == model and k[2] not in held}):
            keys = [trace_key(t.dataset, t.model, t.id) for t in s1_traces
                    if (t.dataset, short_model(t.model)) == (dataset, model) and t.id not in held]
            table = {name: grid([source[k] for k in keys]) for name, source in (("S1", s1_by_key), ("reader", by_reader))}
            vanilla = table["S1"][math.inf]
            print(f"\n{dataset} / {model}, test half ({len(keys)} traces)")
            print(f"{'':<14} Acc%   Abs% (dAbs)     FA% (dFA)")
            print(f"{'vanilla':<14} {cells(vanilla, vanilla)}")
            for name in table:
                print(f"{name + ' h=' + format(chosen[name], 'g'):<14} {cells(table[name][chosen[name]], vanilla)}")
            print(f"every h:       {'S1':<34} | reader")
            for h in (*H_GRID, math.inf):
                print(f"h={h:<6g}       " + " | ".join(cells(table[name][h], vanilla) for name in table))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
