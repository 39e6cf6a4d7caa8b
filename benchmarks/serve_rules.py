"""Do the S1s that ``soma serve`` may serve obey the probability rules on states that are not reasoning?

Jev clients send ``soma serve`` customer messages, log excerpts, tickets and short documents, not the
reasoning traces the S1s were trained on. ``benchmarks/data/serve_rules.jsonl`` holds 50 such states,
written by hand, each with a statement about it, the statement's negation, a set of options that are
mutually exclusive and together cover every case (three with a catch-all, or two complements), and the
same state as a JSON object. Each state is sent to the real server (``soma_local.serve.app.create_app``
on a loopback port, as ``tests/test_jev_server.py`` does), once as text and once as JSON, and per S1
three rules are measured, each a mean over states:

- negation: |p(s) + p(not s) - 1|, both noul questions (mean of the text and JSON renderings);
- options: |sum of p(option) - 1| over the option set, each option asked as the noul question of the
  statement the server scores for it (instructions + ``Answer: option``), before the normalisation a
  choice answer applies (mean of both renderings);
- text vs JSON: |p(text) - p(json)| over the statement, the negation and every option statement.

0 is perfect for each. Beside them, for context, how well each S1 discriminates here: AUROC of p(s)
against whether the statement holds (as written in the file), and how often the choice answer is the
option the file gives. The last rows give the difference (second S1 minus first) with a 95 % interval
from resampling the states (paired: both S1s read the same states).

    python -m benchmarks.serve_rules                      # minilm-reader against minilm-statements
    python -m benchmarks.serve_rules --s1 classifier:minilm-reader --s1 readout --json out.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

DATA = Path(__file__).resolve().parent / "data" / "serve_rules.jsonl"
DEFAULT_S1S = ["classifier:minilm-reader", "classifier:minilm-statements"]
RULES = ("negation", "options", "text_vs_json")


def read_rows(path: Path) -> list[dict]:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    for r in rows:
        if r["answer"] not in r["options"]["criteria"] or len(r["options"]["criteria"]) < 2:
            raise ValueError(f"{path}: {r['id']}: the answer must be one of at least two options")
    return rows


def option_statements(row: dict) -> dict[str, str]:
    """Each option as the server reads it for a choice question (``answers.option_statement``)."""
    from soma_local.serve.answers import option_statement

    instructions = row["options"]["instructions"]
    return {name: option_statement(instructions, desc) for name, desc in row["options"]["criteria"].items()}


def questions(row: dict) -> dict[str, dict]:
    out = {"s": {"type": "noul", "instructions": row["statement"]},
           "not_s": {"type": "noul", "instructions": row["negation"]},
           "choice": {"type": "choice", **row["options"]}}
    out.update({f"option:{name}": {"type": "noul", "instructions": text} for name, text in option_statements(row).items()})
    return out


def ask_all(spec: str, rows: list[dict], threads: int | None) -> tuple[str, list[dict]]:
    """Every row's questions over both renderings of its state, through the real server: answers[i][form][qid]."""
    import httpx

    from soma_local.s1.factory import load_s1
    from soma_local.serve.app import Running, create_app

    s1 = load_s1(spec, n_threads=threads)
    name = s1.name
    answers = []
    try:
        with Running(create_app(s1)) as srv, httpx.Client(base_url=srv.url, timeout=600) as client:
            for row in rows:
                got = {}
                for form, state in (("text", row["text"]), ("json", row["json"])):
                    r = client.post("/v1/systemone", json={"model": "jev-latest", "state": state, "questions": questions(row)})
                    r.raise_for_status()
                    got[form] = r.json()["answers"]
                answers.append(got)
    finally:
        s1.close()
    return name, answers


def per_state(rows: list[dict], answers: list[dict]) -> dict[str, np.ndarray]:
    """Each rule's violation per state, and the context figures' inputs."""
    neg, opt, tj, p_s, right = [], [], [], [], []
    for row, got in zip(rows, answers):
        names = list(row["options"]["criteria"])
        noul = {form: {q: a["noul"] for q, a in got[form].items() if a["type"] == "noul"} for form in got}
        neg.append(np.mean([abs(noul[f]["s"] + noul[f]["not_s"] - 1) for f in noul]))
        opt.append(np.mean([abs(sum(noul[f][f"option:{n}"] for n in names) - 1) for f in noul]))
        tj.append(np.mean([abs(noul["text"][q] - noul["json"][q]) for q in noul["text"]]))
        p_s.append(noul["text"]["s"])
        right.append(np.mean([got[f]["choice"]["choice"] == row["answer"] for f in got]))
    return {"negation": np.array(neg), "options": np.array(opt), "text_vs_json": np.array(tj),
            "p_s": np.array(p_s), "choice_right": np.array(right)}


def paired_interval(a: np.ndarray, b: np.ndarray, resamples: int, seed: int) -> tuple[float, float, float]:
    """Mean of b - a and its 95 % bootstrap interval, states resampled (the same states for both)."""
    d = b - a
    rng = np.random.default_rng(seed)
    means = d[rng.integers(0, len(d), size=(resamples, len(d)))].mean(axis=1)
    lo, hi = np.percentile(means, [2.5, 97.5])
    return float(d.mean()), float(lo), float(hi)


def main(argv: list[str] | None = None) -> int:
    from soma_local.s1.temperature import auroc

    ap = argparse.ArgumentParser(prog="python -m benchmarks.serve_rules", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--s1", action="append", help=f"S1 spec to serve, repeatable (default: {' and '.join(DEFAULT_S1S)}); "
                    "the difference rows compare the first two")
    ap.add_argument("--data", type=Path, default=DATA, help="states, statements and options (default: %(default)s)")
    ap.add_argument("--resamples", type=int, default=10000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, help="CPU threads for the S1")
    ap.add_argument("--json", type=Path, help="also write every answer and per-state figure here")
    args = ap.parse_args(argv)
    rows = read_rows(args.data)
    holds = np.array([r["holds"] for r in rows])
    kinds = sorted({r["kind"] for r in rows})
    counts = ", ".join(f"{sum(r['kind'] == k for r in rows)} {k}" for k in kinds)
    print(f"{args.data.name}: {len(rows)} states ({counts}); {int(holds.sum())} statements hold")
    results, dump = [], {}
    for spec in args.s1 or DEFAULT_S1S:
        name, answers = ask_all(spec, rows, args.threads)
        figures = per_state(rows, answers)
        results.append((name, figures))
        dump[name] = {"answers": answers, **{k: v.tolist() for k, v in figures.items()}}
    print(f"\n{'S1':<32}{'|p(s)+p(not s)-1|':>19}{'|sum p(opt)-1|':>16}{'|p(text)-p(json)|':>19}{'AUROC p(s)':>12}{'choice right':>14}")
    for name, f in results:
        print(f"{name:<32}{f['negation'].mean():>19.3f}{f['options'].mean():>16.3f}{f['text_vs_json'].mean():>19.3f}"
              f"{auroc(f['p_s'], holds):>12.3f}{f['choice_right'].mean():>14.3f}")
    if len(results) >= 2:
        (a_name, a), (b_name, b) = results[:2]
        print(f"\n{b_name} - {a_name}, mean over states [95 % paired bootstrap interval, {args.resamples} resamples]"
              " (below 0: the second obeys the rule better)")
        for rule in RULES:
            mean, lo, hi = paired_interval(a[rule], b[rule], args.resamples, args.seed)
            verdict = "better" if hi < 0 else "worse" if lo > 0 else "no difference beyond noise"
            print(f"  {rule:<14}{mean:>+8.3f} [{lo:+.3f}, {hi:+.3f}]  {verdict}")
            dump.setdefault("differences", {})[rule] = {"mean": mean, "low": lo, "high": hi}
    if args.json:
        args.json.write_text(json.dumps({"data": str(args.data.name), "ids": [r["id"] for r in rows], "s1": dump}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
