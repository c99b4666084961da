"""What program a shell command line runs: the part of a bash app's profile key that names it.

:func:`command_program` reads a command's first words as the shell would (:mod:`shlex`, lazily)
and skips what only prepares the program (assignments, ``env``, ``time``, ``nice``, ``timeout``,
``cd dir &&``, interpreters whose script is the program). Pure text: no file is looked at, and
nothing here knows about Parsl; :mod:`scalpel_executor.learning.keys` finds the command among a
bash app's arguments and puts its program in the key.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass

__all__ = ["command_program"]

_COMMAND_SCAN = 4096  # characters of a command read for its program: the words before it are short
_SHELL_DEPTH = 2  # nested ``bash -c "..."`` followed
_PROGRAM = re.compile(r"^[\w.+\-]{1,64}$")  # no brackets, parentheses, commas or "=": the key stays parseable
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_SEPARATORS = frozenset(";&|")
_PUNCTUATION = frozenset("();<>|&")
_PLAIN_WORDS = re.compile(r"\n|[^ \t\r\n]+")  # shlex's whitespace, not str.split's
_SHELL_SYNTAX = re.compile(r"[\'\"\\#();<>|&]")
#: Words that run the rest of the line: the options of each that take the next word, and how many
#: operands come before the program (``timeout``'s duration).
_WRAPPERS = {
    "env": (frozenset({"-u", "--unset", "-C", "--chdir", "-S", "--split-string"}), 0),
    "time": (frozenset({"-o", "--output", "-f", "--format"}), 0),
    "nice": (frozenset({"-n", "--adjustment"}), 0),
    "timeout": (frozenset({"-s", "--signal", "-k", "--kill-after"}), 1),
    "exec": (frozenset({"-a"}), 0),
    "stdbuf": (frozenset({"-i", "-o", "-e", "--input", "--output", "--error"}), 0),
    "nohup": (frozenset(), 0),
}
#: Shell builtins that prepare the environment for the command after the next ``&&`` or ``;``.
_SETUP = frozenset({"cd", "pushd", "export", "set", "source", ".", "ulimit", "umask", "module"})


@dataclass(frozen=True)
class _Interpreter:
    """How an interpreter's options read: which short options take code inline (then the program is
    the interpreter, or for a shell the code's own program), which take an argument, which names a
    module to run (``python -m``)."""

    code: str
    argument: str = ""
    module: str = ""
    long_argument: frozenset = frozenset()
    shell: bool = False


_PYTHON = _Interpreter(code="c", argument="WX", module="m", long_argument=frozenset({"--check-hash-based-pycs"}))
_SHELL = _Interpreter(code="c", argument="oO", long_argument=frozenset({"--rcfile", "--init-file"}), shell=True)
_INTERPRETERS = {"bash": _SHELL, "sh": _SHELL, "zsh": _SHELL, "dash": _SHELL,
                 "Rscript": _Interpreter(code="e"), "perl": _Interpreter(code="eE", argument="IMm")}
_PYTHON_NAME = re.compile(r"^(python|pypy)[0-9.]*$")


def _interpreter(name: str) -> _Interpreter | None:
    return _PYTHON if _PYTHON_NAME.match(name) else _INTERPRETERS.get(name)


def _shell_words(command: str) -> Iterator[str]:
    """The shell words of ``command`` as :mod:`shlex` reads them, with ``&&``, ``;``, ``|`` and each
    line end words of their own. Raises ValueError at an unbalanced quote."""
    lexer = shlex.shlex(command.replace("\n", " ;\n"), posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    return iter(lexer)


def _words(command: str) -> Iterator[str]:
    """:func:`_shell_words`, lazily and cheaply: words without quotes, escapes, comments or operators
    (most words before a program) are split at whitespace, and shlex reads on from the first word
    that has one. A shlex costs 60 µs to make and 2 µs a character, which every submit would pay."""
    for match in _PLAIN_WORDS.finditer(command):
        word = match.group()
        if word == "\n":
            yield ";"
        elif _SHELL_SYNTAX.search(word) is None:
            yield word
        else:
            yield from _shell_words(command[match.start():])
            return


def _is_separator(word: str) -> bool:
    return bool(word) and set(word) <= _PUNCTUATION and not _SEPARATORS.isdisjoint(word)


def _skip_options(words: Iterator[str], with_argument: frozenset) -> str | None:
    """The first word after a wrapper's options (``-n 5``, ``-oL``, ``--signal=KILL``, ``--``)."""
    for word in words:
        if word == "--":
            return next(words, None)
        if not word.startswith("-"):
            return word
        if word in with_argument:
            next(words, None)
    return None


def _script(words: Iterator[str], name: str, interpreter: _Interpreter, depth: int) -> str | None:
    """The program an interpreter runs: its script's basename, the module after ``-m``, a shell's
    ``-c`` command's program, or the interpreter itself (code inline, or a script on stdin)."""
    for word in words:
        if word == "--":
            word = next(words, None)
            break
        if not word.startswith(("-", "+")) or word in ("-", "+"):
            break
        if word.startswith("--"):
            if word in interpreter.long_argument:
                next(words, None)
            continue
        for position, letter in enumerate(word[1:], start=2):  # a group of short options: -uBm mod
            if letter in interpreter.code + interpreter.module + interpreter.argument:
                value = word[position:] or next(words, None)
                if letter in interpreter.module:
                    return _basename(value)
                if letter in interpreter.code:
                    return _command_program(value, depth + 1) if interpreter.shell and value else name
                break
    else:
        return name
    if word is None or word == "-" or set(word) <= _PUNCTUATION:  # a script on stdin
        return name
    return _basename(word)


def _basename(word: str | None) -> str | None:
    name = (word or "").rsplit("/", 1)[-1]
    return name if _PROGRAM.match(name) else None


def _program(words: Iterator[str], depth: int = 0) -> str | None:
    """The basename of the first real program among shell ``words``, or None (see :func:`command_program`)."""
    if depth > _SHELL_DEPTH:
        return None
    for word in words:
        name = word.rsplit("/", 1)[-1]
        while name in _WRAPPERS:
            with_argument, operands = _WRAPPERS[name]
            word = _skip_options(words, with_argument)
            for _ in range(operands):
                word = next(words, None)
            while word is not None and _ASSIGNMENT.match(word):  # env VAR=1 prog
                word = next(words, None)
            if word is None:
                return None
            name = word.rsplit("/", 1)[-1]
        if _ASSIGNMENT.match(word) or word in ("(", "{", "!") or _is_separator(word):
            continue
        if name in _SETUP:  # cd dir && prog: the program comes after the next separator
            if not any(_is_separator(later) for later in words):
                return None
            continue
        interpreter = _interpreter(name)
        if interpreter is not None:
            return _script(words, name, interpreter, depth)
        if name in _BENCHMARK_RUNNERS:
            return _benchmarked(words, name)
        return name if _PROGRAM.match(name) else None
    return None


#: Programs that run a stand-in for another task, named by ``--name <type>_<number>``: WfCommons'
#: WfBench runs every task of a generated benchmark as ``bin/wfbench --name blastall_00000017 ...``.
_BENCHMARK_RUNNERS = frozenset({"wfbench", "wfbench.py"})
_TASK_NUMBER = re.compile(r"^(?P<type>.+?)_(?:ID)?\d+$")


def _benchmarked(words: Iterator[str], runner: str) -> str | None:
    """``wfbench:<task type>`` for a benchmark runner's ``--name <type>_<number>``; the runner alone
    when the name is missing or does not end in a number."""
    base = runner.removesuffix(".py")
    for word in words:
        if _is_separator(word):
            break
        name = word[len("--name="):] if word.startswith("--name=") else next(words, "") if word == "--name" else None
        if name is not None:
            match = _TASK_NUMBER.match(name)
            kind = match.group("type") if match else None
            return f"{base}:{kind}" if kind and _PROGRAM.match(kind) else base
    return base


def command_program(command: str) -> str | None:
    """The program a shell command line runs: the basename of its first real program word, or None
    when it names none that a key can hold.

    Words before the program are skipped: ``VAR=value`` assignments, ``env`` (and its options and
    assignments), ``time``, ``nice [-n N]``, ``timeout [options] DURATION``, ``exec``,
    ``stdbuf ...``, ``nohup``, and a setup builtin up to the next ``&&`` or ``;`` (``cd dir &&``,
    ``export``, ``source``, ``module``). For an interpreter (``python``, ``python3.11``, ``pypy``,
    ``bash``, ``sh``, ``Rscript``, ``perl``) the program is its script's basename, the module of
    ``python -m``, the program of a shell's ``-c`` command, or the interpreter itself when the code
    is inline or on stdin. A program is at most 64 letters, digits, ``_``, ``.``, ``+`` and ``-``;
    one that is not (``$PROG``, a name with a space) is None, and so is an empty command.

    Pure text: no file is looked at. Only the first 4096 characters are read, lazily, so a long
    command costs no more than its first few words; an unbalanced quote falls back to splitting at
    whitespace.

    >>> command_program("/opt/blast/bin/blastall -p blastn -d nt -i q.fa")
    'blastall'
    >>> command_program("env OMP_NUM_THREADS=4 time nice -n 10 timeout 60 ./bin/split_fasta --in x")
    'split_fasta'
    >>> command_program("cd work && python3 -u bin/align.py q.fa"), command_program("python -m pkg.tool")
    ('align.py', 'pkg.tool')
    >>> command_program('bash -c "stdbuf -oL mProject in.fits"'), command_program("echo 'unbalanced")
    ('mProject', 'echo')
    >>> command_program("   ") is None, command_program("$BIN x") is None
    (True, True)
    >>> command_program("bin/wfbench --name blastall_00000017 --percent-cpu 0.6 --cpu-work 100")
    'wfbench:blastall'

    WfCommons' WfBench runs every task as ``bin/wfbench --name <type>_<number> ...``: the program
    is then ``wfbench:<type>``, so its task types keep profiles of their own.
    """
    return _command_program(command, 0)


def _command_program(command: str, depth: int) -> str | None:
    text = command[:_COMMAND_SCAN]
    try:
        return _program(_words(text), depth)
    except ValueError:  # an unbalanced quote or a trailing backslash: the shell would refuse it too
        return _program(iter(text.split()), depth)
