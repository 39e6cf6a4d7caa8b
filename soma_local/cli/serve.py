"""``soma serve``: a local S1 behind a Jev-compatible ``/v1/systemone`` (loopback by default)."""

from __future__ import annotations

import argparse
import sys

from soma_local.cli.args import THREADS_HELP, UsageError, add_server_arguments, api_key, positive_float, positive_int
from soma_local.serve.answers import MAX_REQUEST_TOKENS, MAX_STATE_TOKENS, Limits


def cmd_serve(args) -> int:
    from soma_local.s1.factory import SERVE_DEFAULT_S1, load_s1
    from soma_local.serve.app import serve

    key = api_key(args)
    s1 = load_s1(args.s1 or SERVE_DEFAULT_S1, temperature=args.s1_temperature, n_threads=args.threads, n_gpu_layers=args.n_gpu_layers)
    if s1 is None:
        raise UsageError("--s1 none: there is no S1 to serve")
    print(f"soma serve: {s1.name} on http://{args.host}:{args.port}/v1/systemone"
          + (" (key required)" if key else " (no key)"), file=sys.stderr)
    serve(s1, host=args.host, port=args.port, api_key=key, max_body_bytes=args.max_body_bytes,
          max_pending=args.max_pending, limits=Limits(args.max_state_tokens, args.max_request_tokens))
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    srv = sub.add_parser("serve", help="serve a local S1 as a Jev-compatible /v1/systemone")
    srv.add_argument("--s1", help="S1 spec to serve (default: classifier:minilm-reader, which serve keeps because "
                     "on states that are not reasoning the statement reader's option sets sum further from 1; "
                     "python -m benchmarks.serve_rules)")
    srv.add_argument("--s1-temperature", type=positive_float,
                     help="S1 temperature T in sigmoid(z/T) (default: the S1's own)")
    add_server_arguments(srv, default_port=8000)
    srv.add_argument("--max-pending", type=positive_int, default=64, help="queued requests before 529 overloaded")
    srv.add_argument("--max-state-tokens", type=positive_int, default=MAX_STATE_TOKENS,
                     help="longest state read, in the S1's tokens (413 beyond); longer than the S1 window: read in windows")
    srv.add_argument("--max-request-tokens", type=positive_int, default=MAX_REQUEST_TOKENS,
                     help="S1 input tokens one request may cost, options x state windows (413 beyond)")
    srv.add_argument("--threads", type=positive_int, help=THREADS_HELP)
    srv.add_argument("--n-gpu-layers", type=int, default=0, help="S1 layers on the GPU (the LLM-judge S1, --s1 readout); -1 offloads all")
    srv.set_defaults(func=cmd_serve)
