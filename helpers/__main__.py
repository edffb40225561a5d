"""Command line: `python -m helpers execute [--mode quick|full] [NOTEBOOK ...]` and `python -m helpers build`."""

import argparse
import ast
import os
import sys

from . import book
from .parameters import MODES
from .executors import SCHEDULER_ENV


def parse_value(text: str):
    """Command-line values as Python literals where possible ("48" -> 48, "[1, 2]" -> list)."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m helpers", description="Execute and build the attention-rank book.")
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("execute", help="run notebooks with papermill into book/")
    run.add_argument("notebooks", nargs="*", metavar="NOTEBOOK", help="names like 01_attention_rank (default: all)")
    run.add_argument("--mode", choices=MODES, default="full", help="quick (CI, previews) or full (default)")
    run.add_argument("-p", "--param", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"),
                     help="extra notebook parameter, e.g. -p SEED 3 (repeatable)")
    run.add_argument("--book-dir", default=None, help="where executed notebooks go (default: book/)")
    run.add_argument("--scheduler", default=None, metavar="ADDRESS",
                     help='run sweeps on a Dask scheduler (tcp://host:8786), "local" (a LocalCluster) or "processes"')
    run.add_argument("--force", action="store_true", help="re-run notebooks whose executed copy is up to date")
    commands.add_parser("build", help="strict Jupyter Book build of the executed notebooks")
    args = parser.parse_args(argv)

    if args.command == "build":
        return book.build()
    params = {name: parse_value(value) for name, value in args.param}
    if args.scheduler:
        os.environ[SCHEDULER_ENV] = args.scheduler  # the kernels inherit it; every sweep picks it up
    try:
        failures = book.execute(args.notebooks, args.mode, params, args.book_dir, force=args.force,
                                scheduler=args.scheduler)
    except ValueError as err:
        parser.error(str(err))
    for failure in failures:
        print(f"error: {failure}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
