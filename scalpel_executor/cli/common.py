"""What several ``scalpel`` commands share: option types, input files, where status lines go.

Exit status, for every command: 0 done; 2 bad input (a ``ValueError`` or ``OSError`` naming the
bad value and the fix); 1 when what the command ran failed (:class:`CommandFailed`).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping, Sequence

from scalpel_executor.core.simulate import ContentionModel
from scalpel_executor.core.contention_fit import load_model
from scalpel_executor.learning.exchange import read_json_object


class CommandFailed(Exception):
    """What the command ran failed (exit status 1), as opposed to bad input (exit status 2)."""


def add_command_parser(commands: argparse._SubParsersAction, name: str, doc: str,
                       run: Callable[[argparse.Namespace], int], **options) -> argparse.ArgumentParser:
    """The sub-parser of ``scalpel name``, its handler ``run``, its text from ``doc``, the command
    module's docstring: one text says what a command does, to a reader of the code and at the prompt.

    The docstring's first paragraph, ````scalpel name``: what it does``, is the line ``scalpel
    --help`` lists; its second is the description ``scalpel name --help`` prints (argparse reflows
    both); what follows is for readers of the code. ``options`` go to ``add_parser`` (``epilog``).
    """
    summary, description = doc.split("\n\n")[:2]
    _, _, help_text = summary.partition(": ")
    parser = commands.add_parser(name, help=" ".join(help_text.split()), description=description, **options)
    parser.set_defaults(run=run)
    return parser


def at_least(least: int) -> Callable[[str], int]:
    """An argparse ``type``: a whole number >= ``least``; argparse names the option in its error."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number >= {least}, got {text!r}") from None
        if value < least:
            raise argparse.ArgumentTypeError(f"must be at least {least}, got {value}")
        return value

    parse.__name__ = f"whole number >= {least}"  # what argparse prints for a value it cannot convert
    return parse


def comma_list(text: str, choices: Sequence[str], *, option: str, noun: str,
               expand: Mapping[str, Sequence[str]] | None = None) -> list[str]:
    """``text`` split at commas, each part one of ``choices`` (or a key of ``expand``, which stands
    for its values); duplicates dropped, order kept. ValueError naming the bad part and the choices."""
    picked: list[str] = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        if expand and part in expand:
            picked.extend(expand[part])
        elif part in choices:
            picked.append(part)
        else:
            raise ValueError(f"unknown {noun} {part!r} in {option}; choose from {', '.join(choices)}")
    if not picked:
        raise ValueError(f"{option} names no {noun} ({text!r}); choose from {', '.join(choices)}")
    return list(dict.fromkeys(picked))


def load_model_file(path: str) -> ContentionModel:
    """The contention model of a calibration file (``--model``); ValueError naming the file."""
    document = read_json_object(path, "calibration")
    try:
        return load_model(document)
    except ValueError as error:
        raise ValueError(f"{path}: {error}") from None


def status_printer(as_json: bool) -> Callable[[str], None]:
    """Where a command's status lines go: standard error when standard output carries its JSON."""
    if as_json:
        return lambda text: print(text, file=sys.stderr)
    return print
