"""jevcompat (the external Jev conformance suite) against ``soma serve``, with auth off and on.

Starts the server in-process on a free loopback port around the chosen local S1, runs the full suite
(official-SDK drop-in check included) and prints the MUST and SHOULD scores, every failure and the
time taken. Nothing leaves the machine.

    python -m benchmarks.jevcompat_serve [--s1 SPEC] [--threads N] [--json DIR]
"""

from __future__ import annotations

import argparse
import secrets
import time
from pathlib import Path

from jevcompat import report, runner

from soma_local.s1.factory import SERVE_DEFAULT_S1, load_s1
from soma_local.serve.app import Running, create_app


def run_suite(s1, key: str | None, timeout: float):
    with Running(create_app(s1, api_key=key)) as server:
        return runner.run(server.url, key=key, timeout=timeout)


def summary_line(label: str, rep) -> str:
    s = rep.summary()
    must, should = s["MUST"], s["SHOULD"]
    return (f"{label}: {rep.verdict} | MUST {must['passed']}/{must['tested']} | SHOULD {should['passed']}/"
            f"{should['tested']} (skipped {should['skipped']}) | {len(rep.exchanges)} requests in {rep.seconds:.0f}s")


def main() -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.jevcompat_serve", description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--s1", help="S1 spec to serve (default: soma serve's, classifier:minilm-reader)")
    parser.add_argument("--threads", type=int, default=1, help="S1 CPU threads (1 is fastest on a shared 2-core box)")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per request")
    parser.add_argument("--json", type=Path, help="write the full jevcompat reports (JSON) into this folder")
    args = parser.parse_args()
    s1 = load_s1(args.s1 or SERVE_DEFAULT_S1, n_threads=args.threads)
    lines = []
    for label, key in (("auth off", None), ("auth on", secrets.token_urlsafe(16))):
        t0 = time.perf_counter()
        rep = run_suite(s1, key, args.timeout)
        print(report.terminal(rep, color=False, evidence=2), flush=True)
        lines.append(summary_line(f"{s1.name}, {label}", rep) + f" (wall {time.perf_counter() - t0:.0f}s)")
        if args.json:
            args.json.mkdir(parents=True, exist_ok=True)
            (args.json / f"jevcompat-{label.replace(' ', '-')}.json").write_text(report.to_json(rep) + "\n")
    print("\n".join(lines))
    s1.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
