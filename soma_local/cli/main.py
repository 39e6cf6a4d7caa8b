"""soma: supervise a local reasoning model (S2) with a fast monitor (S1); one module per subcommand."""

from __future__ import annotations

import sys

from soma_local import __version__
from soma_local.cli import bench, calibrate, replay, run, serve, serve_chat, tune
from soma_local.cli.args import Parser
from soma_local.errors import SomaError

DESCRIPTION = (
    "soma: a fast System One (S1) watches a System Two (S2) reasoning model while it thinks, reminds it "
    "when a monitored problem shows, and takes over when the evidence persists. Everything runs locally."
)


def build_parser() -> Parser:
    parser = Parser(prog="soma", description=DESCRIPTION)
    parser.add_argument("--version", action="version", version=f"soma {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in (run, serve, serve_chat, calibrate, replay, tune, bench):
        command.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        return args.func(args)
    except SomaError as exc:
        print(f"soma: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\nsoma: interrupted (Ctrl-C)", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
