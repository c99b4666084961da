"""What several ``scalpel`` commands share: option types, input files, where status lines go,
profile keys cut to fit a column.

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


KEY_WIDTH = 72  # characters of a key that `profile list` shows; with the other columns, one line of 120


def cut_key(key: str, width: int = KEY_WIDTH) -> str:
    """``key`` in at most ``width`` characters, keeping what tells keys apart; ``show`` and --wide give it whole.

    A key reads ``module.app[program](shape)``: the module path is the same for every app of a
    workflow and goes first, then the end of the shape; the app's own name and the program in
    brackets (a WfBench task type, ``[wfbench:blastall]``) are cut last, the program never while
    the width allows it. Each cut is marked by an ellipsis.

    >>> cut_key("wf.tasks.generic_shell_app[wfbench:blastall](str,inputs=1,outputs=1)", 40)
    'generic_shell_app[wfbench:blastall](str…'
    >>> cut_key("examples.kernels.matmul(~2048)", 24)
    '…kernels.matmul(~2048)'
    >>> cut_key("pkg.a_very_long_application_name[tool](x)", 16)
    '…tion_name[tool]'
    """
    return _cut(key, width)[0]


def cut_keys(keys: Sequence[str], width: int = KEY_WIDTH) -> list[str]:
    """``keys`` cut as :func:`cut_key` cuts each, the keys of one module losing the same module
    components, the most any of them loses: cut one by one, one app's rows of a run read
    ``__main__.plot(n<16)`` beside ``plot(~22.6)``, as if two apps ran.

    >>> cut_keys(["__main__.plot(n<16)", "__main__.plot(~22.6)", "lab.fit(~64)"], 19)
    ['plot(n<16)', 'plot(~22.6)', 'lab.fit(~64)']
    """
    def module(key: str) -> str:
        return key.partition("(")[0].partition("[")[0].rpartition(".")[0]

    drop: dict[str, int] = {}
    for key in keys:
        drop[module(key)] = max(drop.get(module(key), 0), _cut(key, width)[1])
    return [_cut(key, width, drop[module(key)])[0] for key in keys]


def _cut(key: str, width: int, drop: int = 0) -> tuple[str, int]:
    """:func:`cut_key`'s text, dropping at least ``drop`` module components, and how many it dropped."""
    if len(key) <= width and not drop:
        return key, 0
    name, paren, shape = key.partition("(")
    app, bracket, program = name.partition("[")
    head, tail = app, bracket + program + paren + shape
    parts, dropped = app.split("."), 0
    while len(parts) > 1 and (dropped < drop or len(head) + len(tail) > width):  # module components first
        parts, dropped = parts[1:], dropped + 1
        head = "…" + ".".join(parts) if len(parts) > 1 else parts[0]
    text = head + tail
    if len(text) <= width:
        return text, dropped
    kept = len(head) + len(bracket + program + paren)
    if kept < width:  # the shape's end goes
        return text[:width - 1] + "…", dropped
    return "…" + (head + bracket + program)[-(width - 1):], dropped  # the app's name gives its start, the program stays
