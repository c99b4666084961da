"""The ``scalpel`` command: one module per command, each with its parser beside its handler.

Each command module has ``add_command(commands)``, which adds its sub-parser and sets ``run`` to
its handler; :func:`~scalpel_executor.cli.common.add_command_parser` takes a command's help and
description from its module's docstring (``simulate`` and ``profile`` build theirs, from the shipped
profiles and the default store). Exit status: 0 done; 2 bad input, named in one line on standard
error; 1 when what the command ran failed (``scalpel profile run``).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from scalpel_executor import __version__
from scalpel_executor.cli import bench, calibrate, demo, profile, report, simulate, topology
from scalpel_executor.cli.common import CommandFailed

#: In the order ``scalpel --help`` lists them.
COMMANDS = (topology, simulate, demo, bench, calibrate, profile, report)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="scalpel",
        description="Contention-aware co-scheduling of many-task workflows on shared last-level caches.",
        epilog="`scalpel COMMAND --help` explains every option of a command.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        command.add_command(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.run(args)
    except CommandFailed as error:  # the command ran, and what it ran failed (exit 1)
        print(f"scalpel: {error}", file=sys.stderr)
        return 1
    except BrokenPipeError:  # e.g. `scalpel profile list | head`
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except (ValueError, OSError) as error:  # bad input, a file that cannot be read or written (exit 2)
        print(f"scalpel: {error}", file=sys.stderr)
        return 2


__all__ = ["build_parser", "main"]
