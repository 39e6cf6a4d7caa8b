"""Load on ``soma serve`` over loopback: C concurrent clients, each sending R requests, a share of
them malformed. Prints requests/s, p50/p95 latency of the valid requests, how the bad ones were
answered (they must all be 4xx, never 5xx) and the error count. Bounded: C*R requests and a wall
limit; the server runs in-process on a free 127.0.0.1 port.

    PYTHONPATH=. python benchmarks/serve_load.py [--s1 SPEC] [--clients 32] [--requests 4] [--bad-every 4]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from collections import Counter

import httpx

from soma_local.s1.factory import load_s1
from soma_local.server import Running, create_app

STATE = ("Task: What is 17 + 25?\n\nReasoning so far: 17 + 25 = 42. Let me check: 25 + 17 = 42. "
         "Check again by tens: 10 + 20 = 30, 7 + 5 = 12, 30 + 12 = 42. Yes, 42.")
STATEMENT = ("The reasoning has already reached and confirmed a final answer, but it is still re-checking or "
             "re-deriving that same answer without naming a specific concern.")
# Requests every official source rejects (jevcompat's invalid cases and more).
BAD = [
    b'{"model": "jev-latest", "state": "x", "questions": {',
    json.dumps({"model": "jev-latest", "questions": {"q": {"type": "noul", "instructions": "x"}}}).encode(),
    json.dumps({"model": "jev-latest", "state": "x", "questions": {}}).encode(),
    json.dumps({"model": "jev-latest", "state": "x", "questions": {"q": {"type": "boolean"}}}).encode(),
    json.dumps({"model": "jev-latest", "state": "x", "questions": {"q": {"type": "choice", "criteria": {}}}}).encode(),
    json.dumps({"model": "no-such-model", "state": "x", "questions": {"q": {"type": "noul", "instructions": "x"}}}).encode(),
    b"\xff\xfe not utf-8",
]


def good_body(i: int) -> bytes:
    # A distinct state per request, so no request is answered from a repeated prompt.
    return json.dumps({"model": "jev-latest", "state": f"{STATE} (request {i})",
                       "questions": {"overthinking": {"type": "noul", "instructions": STATEMENT}}}).encode()


async def client(http: httpx.AsyncClient, cid: int, args, results: list) -> None:
    for r in range(args.requests):
        n = cid * args.requests + r
        bad = args.bad_every > 0 and n % args.bad_every == args.bad_every - 1
        body = BAD[n % len(BAD)] if bad else good_body(n)
        t0 = time.perf_counter()
        try:
            resp = await http.post("/v1/systemone", content=body, headers={"Content-Type": "application/json"})
            status = resp.status_code
        except httpx.HTTPError as exc:
            status = type(exc).__name__
        results.append((bad, status, time.perf_counter() - t0))


async def load(url: str, args) -> tuple[list, float]:
    results: list = []
    limits = httpx.Limits(max_connections=args.clients)
    async with httpx.AsyncClient(base_url=url, timeout=args.timeout, limits=limits) as http:
        t0 = time.perf_counter()
        await asyncio.wait_for(
            asyncio.gather(*(client(http, c, args, results) for c in range(args.clients))), args.wall_limit
        )
        return results, time.perf_counter() - t0


def pct(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1] if len(values) > 1 else values[0]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--s1", help="S1 spec to serve (default: the default local S1)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--requests", type=int, default=4, help="requests per client")
    parser.add_argument("--bad-every", type=int, default=4, help="every Nth request is malformed (0: none)")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per request")
    parser.add_argument("--wall-limit", type=float, default=1200.0, help="seconds for the whole run")
    args = parser.parse_args()
    s1 = load_s1(args.s1, n_threads=args.threads)
    with Running(create_app(s1)) as server:
        results, wall = asyncio.run(load(server.url, args))
    s1.close()
    good = [(s, t) for bad, s, t in results if not bad]
    bad = [s for b, s, _ in results if b]
    ok = sorted(t for s, t in good if s == 200)
    errors = [s for s, _ in good if s != 200] + [s for s in bad if not (isinstance(s, int) and 400 <= s < 500)]
    print(f"S1 {s1.name} | {args.clients} concurrent clients x {args.requests} requests over loopback")
    print(f"requests: {len(results)} in {wall:.1f}s = {len(results) / wall:.2f} req/s "
          f"({len(ok) / wall:.2f} answered/s)")
    if ok:
        print(f"valid requests answered: {len(ok)}/{len(good)} | latency p50 {pct(ok, 50):.2f}s, p95 {pct(ok, 95):.2f}s, "
              f"max {ok[-1]:.2f}s")
    print(f"malformed requests: {len(bad)}, answered {dict(Counter(bad))} (4xx expected, never 5xx)")
    print(f"errors (valid not 200, or malformed not 4xx): {len(errors)} {dict(Counter(errors)) if errors else ''}")
    return 0 if not errors else 1


if __name__ == "__main__":
    raise SystemExit(main())
