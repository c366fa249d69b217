"""The ``kafkette`` command: ``kafkette serve ...``."""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kafkette", description="Kafka for Python.")
    commands = parser.add_subparsers(dest="command", required=True)
    from kafkette.server import serve

    serve_parser = commands.add_parser("serve", help="run a Kafka broker")
    serve.add_arguments(serve_parser)
    args = parser.parse_args(argv)
    if args.command == "serve":
        return serve.main(args)
    parser.error(f"unknown command {args.command}")
    return 2


if __name__ == "__main__":
    sys.exit(main())
