"""``soma serve-chat``: a supervised S2 behind an OpenAI-compatible ``/v1/chat/completions`` (loopback by
default). The server's monitors and h are chosen the way ``soma run`` chooses them: ``--monitor``,
then ``--threshold``, the calibration file, the monitor file's default."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from soma_local.cli.args import (
    UsageError, add_s2_arguments, add_server_arguments, add_supervision_arguments, api_key, nonnegative_int,
    parse_thresholds, positive_int, s2_options, supervision,
)
from soma_local.supervisor import DEFAULT_MONITORS


def cmd_serve_chat(args) -> int:
    from soma_local.engine.monitors import resolve_monitors
    from soma_local.serve.chat import create_chat_app
    from soma_local.supervisor import Supervisor

    key = api_key(args)
    options = s2_options(args)
    monitors = resolve_monitors(args.monitor or DEFAULT_MONITORS)
    thresholds = parse_thresholds(args.threshold or [], [m.name for m in monitors])
    if args.trace_dir is not None:
        try:
            args.trace_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UsageError(f"--trace-dir {args.trace_dir}: cannot be made ({exc.strerror})") from None
    with Supervisor(**options.model_dump(), **supervision(args, monitors, thresholds),
                    concurrency=args.concurrency) as supervisor:
        app = create_chat_app(supervisor, model=args.served_model_name, api_key=key,
                              max_body_bytes=args.max_body_bytes, max_queue=args.max_queue, trace_dir=args.trace_dir)
        print(f"soma serve-chat: {args.served_model_name or supervisor.s2_name} (S1 {supervisor.s1_name}, monitors "
              f"{', '.join(supervisor.monitor_names)}) on http://{args.host}:{args.port}/v1/chat/completions"
              + (" (key required)" if key else " (no key)"), file=sys.stderr)
        import uvicorn

        uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    srv = sub.add_parser("serve-chat", help="serve a supervised S2 as an OpenAI-compatible /v1/chat/completions",
                         description="Serve S2, supervised by S1's monitors, as an OpenAI-compatible chat endpoint "
                         "(/v1/chat/completions, /v1/models): thinking streams as reasoning_content, the answer as "
                         "content, scans, reminders and takeovers in a 'soma' field. See docs/chat-endpoint.md.")
    add_supervision_arguments(srv, served=True)
    add_s2_arguments(srv)
    srv.add_argument("--concurrency", type=positive_int, default=1,
                     help="runs at once (vllm only: the in-process llama.cpp S2 runs one at a time)")
    srv.add_argument("--served-model-name", help="the model name clients send and /v1/models lists (default: S2's name)")
    add_server_arguments(srv, default_port=8080)
    srv.add_argument("--max-queue", type=nonnegative_int, default=8,
                     help="requests waiting for S2 before new ones get 429 with Retry-After")
    srv.add_argument("--trace-dir", type=Path, help="write one trace per request: DIR/<x-request-id>.jsonl")
    srv.add_argument("--log-level", default="warning", choices=["critical", "error", "warning", "info", "debug"],
                     help="uvicorn's log level (info logs every request)")
    srv.set_defaults(func=cmd_serve_chat)
