"""What the one trace model (``calibration.recorded``) reads from the shared traces, and what training
draws from it.

Prints the traces, how many count as closed and how many have a gold, then redraws the reader states
(``training.states.reader_set.draw_states`` with the committed draw's defaults) and rebuilds the labelled
pairs (``training.labels.pairs.all_pairs``), each with a digest of every field, so a change to the trace
model shows as a changed digest. Before the two trace parsers became one (commit 615bfd0, with its own
modules) the same draw gave 4,200 states, digest 3194efee7925, and 33,955 pairs, digest 96e24d68e2a9.
"""

from __future__ import annotations

import argparse
import hashlib
import json
from dataclasses import asdict

from soma_local.calibration.recorded import load_all, reserved_questions
from soma_local.data_dir import data_dir
from soma_local.s2.model_files import GgufVocab, resolve_gguf
from training.bank.statement_bank import load_bank
from training.labels.pairs import all_pairs
from training.states.reader_set import draw_states


def _digest(rows) -> str:
    return hashlib.sha256("\n".join(json.dumps(r, sort_keys=True) for r in rows).encode()).hexdigest()[:12]


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.trace_counts", description=__doc__.split("\n\n")[0])
    ap.add_argument("--per-monitor", type=int, default=2100, help="reader states per monitor (the committed draw's)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    root = data_dir()
    traces = load_all(root)
    print(f"traces {len(traces)}, closed {sum(t.closed for t in traces)}, "
          f"with a gold {sum(t.gold is not None for t in traces)}")
    refs = draw_states(traces, GgufVocab.from_path(resolve_gguf(None)), reserved_questions(root), args.per_monitor,
                       seed=args.seed)
    print(f"reader states drawn {len(refs)} (references digest {_digest(r.model_dump() for r in refs)})")
    pairs = all_pairs(load_bank(), root)
    print(f"labelled pairs {len(pairs)} (texts and labels digest {_digest(asdict(p) for p in pairs)})")


if __name__ == "__main__":
    main()
