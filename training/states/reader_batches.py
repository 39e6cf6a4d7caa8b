"""Draw the reader-labelled state set and write the batch files a reader labels.

    python -m training.states.reader_batches --per-monitor 2100 --double 220

Writes ``training/data/reader_states.jsonl`` (references only, committed) and, under the ignored
``training/runs/reader_batches/``, one file per batch holding just what the reader may see: the state
id, the monitor and the state text. ``--double`` states are also written to separate ``D`` batches,
for a second, independent reader: their agreement is the ceiling any S1 can show against gold.
"""

from __future__ import annotations

import argparse
import random

from soma_local.calibration.recorded import load_all, reserved_questions
from soma_local.data_dir import data_dir
from soma_local.s2.model_files import GgufVocab, resolve_gguf
from training.paths import READER_BATCHES, READER_STATES, shown
from training.states.reader_set import MONITORS, draw_states, render_state, trace_key, write_jsonl


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m training.states.reader_batches", description=__doc__.split("\n\n")[0])
    ap.add_argument("--per-monitor", type=int, default=2100)
    ap.add_argument("--double", type=int, default=220, help="states labelled twice (half per monitor)")
    ap.add_argument("--batch-size", type=int, default=100)
    ap.add_argument("--double-source", type=int, default=4, help="draw the doubles from this many first batches")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)

    root = data_dir()
    traces = load_all(root)
    refs = draw_states(traces, GgufVocab.from_path(resolve_gguf(None)), reserved_questions(root), args.per_monitor, seed=args.seed)
    write_jsonl(READER_STATES, (r.model_dump() for r in refs))
    by_key = {trace_key(t.dataset, t.model, t.question_id): t for t in traces}

    def row(ref):
        return {"sid": ref.sid, "monitor": ref.monitor,
                "state": render_state(by_key[trace_key(ref.dataset, ref.model, ref.question_id)], ref.cut_char)}

    READER_BATCHES.mkdir(parents=True, exist_ok=True)
    for old in READER_BATCHES.glob("*.jsonl"):
        old.unlink()
    # Mixed batches (the monitors alternate), so any prefix of the batches is balanced.
    per = {m: [r for r in refs if r.monitor == m] for m in MONITORS}
    order = [r for pair in zip(*per.values()) for r in pair]
    order += [r for m in MONITORS for r in per[m][min(map(len, per.values())) :]]
    batches = [order[i : i + args.batch_size] for i in range(0, len(order), args.batch_size)]
    for n, batch in enumerate(batches, 1):
        write_jsonl(READER_BATCHES / f"B{n:03d}.jsonl", (row(r) for r in batch))
    # The doubles come from the first --double-source batches; whoever labels those must not get a D batch.
    source = [r for b in batches[: args.double_source] for r in b]
    doubles = [r for m in MONITORS for r in random.Random(args.seed + 1).sample([s for s in source if s.monitor == m], args.double // 2)]
    random.Random(args.seed + 2).shuffle(doubles)
    half = (len(doubles) + 1) // 2
    for j, part in enumerate((doubles[:half], doubles[half:]), 1):
        write_jsonl(READER_BATCHES / f"D{j:03d}.jsonl", (row(r) for r in part))
    print(f"{len(refs)} states -> {shown(READER_STATES)}; {len(batches)} batches B* and 2 double "
          f"batches D* (from B001-B{args.double_source:03d}) in {shown(READER_BATCHES)}")


if __name__ == "__main__":
    main()
