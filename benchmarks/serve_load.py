"""Load on ``soma serve`` over loopback: C concurrent clients, each sending R requests, a share of
them malformed. Prints requests/s, p50/p95 latency of the valid requests, how the bad ones were
answered (they must all be 4xx, never 5xx) and the error count. Bounded: C*R requests and a wall
limit; the server runs in-process on a free 127.0.0.1 port.

    python -m benchmarks.serve_load [--s1 SPEC] [--clients 32] [--requests 4] [--bad-every 4]

Mixed mode (``--heavy H``): H of the C clients send heavy requests (a 255-option choice over a
1,900-character state, the issue-13 example) and the others one-question light requests, all in a
loop for ``--duration`` seconds; then nothing new is sent and whatever is still running after
``--drain`` more seconds is abandoned. Prints p50/p95/max of the light requests alone with heavy
ones in flight (an abandoned light request counts at the time it had waited, a lower bound) and the
share over the SDK's 10 s timeout. Uses only ``create_app(s1)``, so it runs on older code too:

    python -m benchmarks.serve_load --clients 32 --heavy 4 --duration 60
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from collections import Counter

import httpx

from soma_local.s1.factory import SERVE_DEFAULT_S1, load_s1
from soma_local.serve.app import Running, create_app

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


HEAVY_STATE = " ".join(
    f"Ticket {i}: the customer reports that order {1000 + i} arrived late, the invoice lists it twice, and "
    "support has not answered for three days." for i in range(14)
)[:1900]
SDK_TIMEOUT = 10.0


def heavy_body(i: int) -> bytes:
    options = {f"Team {k}": f"Handles case family {k}" for k in range(255)}
    return json.dumps({"model": "jev-latest", "state": f"{HEAVY_STATE} ({i})",
                       "questions": {"team": {"type": "choice", "instructions": "Which team should handle this?",
                                              "criteria": options}}}).encode()


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


async def mixed(url: str, args) -> tuple[list, float]:
    """(kind, status, seconds) of every request, heavy and light clients looping until the deadline."""
    results: list = []
    started: dict[int, tuple[str, float]] = {}  # client -> (kind, start) of its request in flight
    limits = httpx.Limits(max_connections=args.clients)
    async with httpx.AsyncClient(base_url=url, timeout=args.timeout, limits=limits) as http:
        t0 = time.perf_counter()
        deadline = t0 + args.duration

        async def loop(cid: int) -> None:
            kind = "heavy" if cid < args.heavy else "light"
            n = 0
            while time.perf_counter() < deadline:
                body = heavy_body(cid * 10_000 + n) if kind == "heavy" else good_body(cid * 10_000 + n)
                n += 1
                started[cid] = (kind, time.perf_counter())
                try:
                    resp = await http.post("/v1/systemone", content=body, headers={"Content-Type": "application/json"})
                    status = resp.status_code
                except httpx.HTTPError as exc:
                    status = type(exc).__name__
                results.append((kind, status, time.perf_counter() - started.pop(cid)[1]))

        tasks = [asyncio.ensure_future(loop(c)) for c in range(args.clients)]
        await asyncio.wait(tasks, timeout=args.duration + args.drain)
        now = time.perf_counter()
        for kind, start in started.values():
            results.append((kind, "abandoned", now - start))
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        return results, now - t0


def report_mixed(results: list, wall: float, args) -> int:
    light = sorted(t for kind, s, t in results if kind == "light" and s in (200, "abandoned"))
    statuses = {kind: dict(Counter(str(s) for k, s, _ in results if k == kind)) for kind in ("light", "heavy")}
    print(f"mixed load: {args.clients} clients ({args.heavy} heavy, {args.clients - args.heavy} light) for "
          f"{args.duration:.0f}s + drain {args.drain:.0f}s, wall {wall:.1f}s")
    print(f"statuses: light {statuses['light']} | heavy {statuses['heavy']}")
    if light:
        over = sum(t > SDK_TIMEOUT for t in light)
        print(f"light requests: {len(light)} | p50 {pct(light, 50):.2f}s, p95 {pct(light, 95):.2f}s, max {light[-1]:.2f}s | "
              f"over the SDK's {SDK_TIMEOUT:.0f}s timeout: {over} ({100 * over / len(light):.0f}%)")
    fives = [s for _, s, _ in results if isinstance(s, int) and s >= 500]
    print(f"5xx: {len(fives)}")
    return 0 if not fives else 1


def pct(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1] if len(values) > 1 else values[0]


def main() -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.serve_load", description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--s1", help="S1 spec to serve (default: soma serve's, classifier:minilm-reader)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--requests", type=int, default=4, help="requests per client")
    parser.add_argument("--bad-every", type=int, default=4, help="every Nth request is malformed (0: none)")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per request")
    parser.add_argument("--wall-limit", type=float, default=1200.0, help="seconds for the whole run")
    parser.add_argument("--heavy", type=int, default=0, help="mixed mode: this many clients send heavy requests")
    parser.add_argument("--duration", type=float, default=60.0, help="mixed mode: seconds of sending")
    parser.add_argument("--drain", type=float, default=30.0, help="mixed mode: seconds to wait for requests in flight")
    args = parser.parse_args()
    s1 = load_s1(args.s1 or SERVE_DEFAULT_S1, n_threads=args.threads)
    if args.heavy:
        with Running(create_app(s1)) as server:
            results, wall = asyncio.run(mixed(server.url, args))
        print(f"S1 {s1.name}")
        code = report_mixed(results, wall, args)
        s1.close()
        return code
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
