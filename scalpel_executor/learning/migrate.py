"""Stores written under the first key rule (schema 1): their keys rewritten by today's rule.

The first rule wrote integers below 16 exactly, the *values* inside an upstream task's dict, words
and string lengths inside tuples, and one signature per ``inputs=`` item. A store it filled
holds, for one unchanged workflow, a key per seed, per CPU number and per timestamp. The schema-1
to schema-2 upgrade (:meth:`~scalpel_executor.learning.store.ProfileStore`, once, in one
transaction) reads each old key's text, writes the key today's rule would compute for the same
call, and merges the rows that meet::

    old rows ── rekey(text) ──> (shape key, exact key) ── merge_rows ──> one row per shape key
                     │                                               └─> one variant per exact key
                     └ None: left as it was (the key keeps its statistics and still feeds its app's profile)

What the old text cannot say is left alone: a key cut to 240 characters and a digest, an
``inputs=`` of 16 items (the old rule showed only the first 16), an array of a dtype without an
item size in its name. Nor does it say which program a bash app's command ran, which today's rule
names in brackets after the app (``generic_shell_app[blastall](str,...)``): such a key is rewritten
without one, which only a command naming no program still computes; it feeds the app's pooled
profile, where a program's key with no history of its own takes its estimates. One guess is made,
and a wrong one only means the new key starts afresh: a list or dict shown by its length
(``list8``) holds no arrays or files (today's rule would add their total size). Totals in
``inputs=`` come out as today's rule makes them, because it adds each element's size rounded to its
bucket, which is what the old text shows. Pure text and numbers: the store does the I/O.

Beside the rewriting, what else reads a key's text lives here: which keys a size-free key stands
for (:func:`size_free_prefix`, :func:`size_free_match`) and a key's family, the key before its
arguments, whose keys lend a malleable key with no speed-up of its own theirs (:func:`family_of`,
:func:`app_of`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable

from scalpel_executor.core.units import parse_size
from scalpel_executor.learning.keys import LONG_STRING, SIZE_FREE, SMALL, _limited, _weight, bucket, representative, size_bucket
from scalpel_executor.learning.refine import merge_rows

__all__ = ["rekey", "rekey_rows", "size_free_prefix", "size_free_match", "family_of", "app_of", "arguments_of",
           "number_part"]

_NUMBER = re.compile(r"^-?(~[0-9.e+\-]+|\d+|nan|inf)$")
_SMALL_INT = re.compile(r"^-?\d+$")
_WORDLIKE = re.compile(r"^[A-Za-z][A-Za-z0-9_+\-]{0,31}$")
_LENGTH = re.compile(r"^(str|bytes)(~[0-9.e+]+|\d+)$")
_ARRAY = re.compile(r"^([A-Za-z_][\w]*)\[([^\]]*)\]$")
_ITEMSIZE = re.compile(r"^[fiucb](\d+)$")
_CONTAINER = re.compile(r"^(list|dict|set|frozenset|tuple|deque|range)(~[0-9.e+]+|\d+)$")
_CLOSING = {"(": ")", "[": "]", "{": "}"}


class _Unknown(Exception):
    """The old text does not determine the new key."""


def _split(text: str) -> list[str]:
    """Split at commas outside brackets; _Unknown when the brackets do not balance."""
    parts, start, stack = [], 0, []
    for position, char in enumerate(text):
        if char in _CLOSING:
            stack.append(_CLOSING[char])
        elif char in ")]}":
            if not stack or stack.pop() != char:
                raise _Unknown(text)
        elif char == "," and not stack:
            parts.append(text[start:position])
            start = position + 1
    if stack:
        raise _Unknown(text)
    parts.append(text[start:])
    return [] if parts == [""] else parts


def _representative(text: str) -> float:
    return float(text.lstrip("~"))


def _bulk(token: str) -> float:
    """Bytes a token's data weighed, as today's rule adds them up (each size its bucket's
    representative); 0 for numbers, words, short strings."""
    if token.startswith("file~"):
        return _weight(parse_size(token[5:]))  # the text shows a tenth of a unit; the bucket gives the rest
    length = _LENGTH.match(token)
    if length:
        size = _representative(length.group(2))
        return _weight(size) if length.group(1) == "bytes" or size >= LONG_STRING else 0.0
    array = _ARRAY.match(token)
    if array:
        itemsize = _ITEMSIZE.match(array.group(1))
        if itemsize is None:
            raise _Unknown(token)
        return float(itemsize.group(1)) * math.prod(representative(_representative(dim)) if dim != "0" else 0.0
                                                    for dim in array.group(2).split("x") if dim)
    if token.startswith("("):
        return sum(_bulk(item) for item in _split(token[1:-1]))
    if token.startswith("{"):
        return sum(_bulk(item.partition(":")[2]) for item in _split(token[1:-1]))
    return 0.0  # numbers, words, short strings, type names; a container is taken to hold no data


def _token(token: str, level: str, exact: bool) -> str:
    """One old signature as today's rule writes it. ``level``: "argument", "element" (in a short
    tuple) or "content" (in a dict)."""
    if _NUMBER.match(token):
        if level == "content":
            return "num"
        return token if exact or not _SMALL_INT.match(token) or abs(int(token)) >= 16 else SMALL
    if token in ("True", "False"):
        return "bool" if level == "content" else token
    if token == "None" or token == "file" or token.startswith("file~") or token.startswith("bytes"):
        return token
    length = _LENGTH.match(token)
    if length:
        return token if _representative(length.group(2)) >= LONG_STRING else "str"
    if _ARRAY.match(token):
        return token
    if token.startswith("("):
        items = _split(token[1:-1])
        if level == "content":
            if any(_bulk(item) for item in items):
                raise _Unknown(token)
            return f"tuple{bucket(len(items))}"
        return "(" + ",".join(_token(item, "element", exact) for item in items) + ")"
    if token.startswith("{"):
        fields = []
        for item in _split(token[1:-1]):
            name, colon, value = item.partition(":")
            if not colon:
                raise _Unknown(token)
            fields.append(f"{name}:{_token(value, 'content', exact)}")
        return "{" + ",".join(fields) + "}"
    if _CONTAINER.match(token):  # taken to hold no arrays or files, which today's rule would weigh
        return token
    if _WORDLIKE.match(token) and token[:1].islower():  # a word (type names are capitalised)
        return token if level == "argument" else "str"
    return token  # a type name


def _argument(part: str, exact: bool) -> str:
    name, equals, value = part.partition("=")
    if not equals or not name.isidentifier():
        return _token(part, "argument", exact)
    if name == "inputs" and value.startswith("["):
        items = _split(value[1:-1])
        if len(items) >= 16:
            raise _Unknown(value)
        bulk = sum(_bulk(item) for item in items)
        return f"inputs={bucket(len(items))}" + (f"[{size_bucket(bulk)}]" if bulk else "")
    if name == "outputs":
        return part
    return f"{name}={_token(value, 'argument', exact)}"


def rekey(old: str) -> tuple[str, str] | None:
    """The (shape key, exact key) today's rule gives the call that the first rule keyed ``old``;
    None when the text does not say.

    >>> rekey("mypkg.normalise({cpu:0,name:lookup-0,t0:~1805811301},~64)")
    ('mypkg.normalise({cpu:num,name:str,t0:num},~64)', 'mypkg.normalise({cpu:num,name:str,t0:num},~64)')
    >>> rekey("mypkg.simulate(3,~2048)")
    ('mypkg.simulate(n<16,~2048)', 'mypkg.simulate(3,~2048)')
    >>> rekey("polybench/adi") is None
    True
    """
    app, parenthesis, rest = old.partition("(")
    if not parenthesis or not rest.endswith(")") or "…#" in old or not app:
        return None
    try:
        parts = _split(rest[:-1])
        shape = f"{app}({','.join(_argument(part, False) for part in parts)})"
        exact = f"{app}({','.join(_argument(part, True) for part in parts)})"
    except (_Unknown, ValueError):
        return None
    return _limited(shape), _limited(exact)


def rekey_rows(rows: Iterable[tuple]) -> tuple[list[tuple], list[tuple[str, tuple]], int]:
    """Schema-1 rows rewritten: (profile rows, (shape key, variant row) pairs, how many rows changed key).

    A row whose key has a small integer counts once in its shape key's row and once as the
    variant of its exact key, so a later split gives that exact key its old statistics back.
    """
    profiles: dict[str, list[tuple]] = {}
    variants: dict[str, tuple[str, list[tuple]]] = {}
    changed = 0
    for row in rows:
        keys = rekey(row[0])
        shape, exact = keys if keys is not None else (row[0], row[0])
        changed += shape != row[0]
        profiles.setdefault(shape, []).append(row)
        if exact != shape:
            variants.setdefault(exact, (shape, []))[1].append(row)
    merged = [rows[0] if len(rows) == 1 and rows[0][0] == key else merge_rows(key, rows)
              for key, rows in profiles.items()]
    return merged, [(shape, merge_rows(exact, rows)) for exact, (shape, rows) in variants.items()], changed


def family_of(key: str) -> str:
    """A computed key's family, which the calls of one app share whatever their arguments' values:
    the key before its arguments. ``app_of``: the app, without a bash app's program (None for a
    key a user named, which has no arguments).

    >>> family_of("wf.shell[blastall](str)"), app_of("wf.shell[blastall](str)"), app_of("fft")
    ('wf.shell[blastall]', 'wf.shell', None)
    """
    return key.partition("(")[0]


def app_of(key: str) -> str | None:
    return family_of(key).partition("[")[0] if "(" in key else None


def arguments_of(key: str) -> list[str] | None:
    """A computed key's arguments as it writes them, split at its commas outside brackets; None for
    a key with none to split (a key a user named, one cut short).

    >>> arguments_of("lab.fit(~512,{a:num},seed=~108)"), arguments_of("fft")
    (['~512', '{a:num}', 'seed=~108'], None)
    """
    try:
        parts = _parts(key)
    except _Unknown:
        return None
    return None if parts is None else parts[1]


def number_part(part: str) -> bool:
    """Whether an argument of a key (:func:`arguments_of`), named or not, is a number as keys write
    them: a small integer (``n<16``), a bucket (``~108``) or an exact value.

    >>> [number_part(part) for part in ("n<16", "seed=~108", "3", "str", "{a:num}")]
    [True, True, True, False, False]
    """
    name, equals, value = part.partition("=")
    value = value if equals and name.isidentifier() else part
    return value == SMALL or _NUMBER.match(value) is not None


def size_free_prefix(key: str) -> str | None:
    """The text every key ``key`` adopts starts with (its app and opening parenthesis), or None when
    ``key`` has no size-free argument (:data:`~scalpel_executor.learning.keys.SIZE_FREE`) to adopt by.

    >>> size_free_prefix("lab.fft_peak(~512,*)"), size_free_prefix("lab.fft_peak(~512,~108)")
    ('lab.fft_peak(', None)
    """
    try:
        parts = _parts(key)
    except _Unknown:
        return None
    if parts is None or not any(_free(part) for part in parts[1]):
        return None
    return parts[0] + "("


def size_free_match(key: str, old: str) -> bool:
    """Whether ``old``, a key written before its app declared size-free arguments, is one of the keys
    ``key`` (written since) stands for: the same app and arguments, but anything where ``key`` has
    ``*``. A store adopts such keys' history into ``key`` (docs/profiles.md, "Arguments that do not change a task's size").

    >>> size_free_match("lab.fft_peak(~512,*)", "lab.fft_peak(~512,~108)")
    True
    >>> size_free_match("lab.fft_peak(~512,*)", "lab.fft_peak(~1024,~108)")
    False
    >>> size_free_match("lab.run(~64,seed=*)", "lab.run(~64,seed=n<16)"), size_free_match("lab.run(*)", "lab.run(*)")
    (True, False)
    """
    try:
        new, was = _parts(key), _parts(old)
    except _Unknown:
        return False
    if new is None or was is None or new[0] != was[0] or len(new[1]) != len(was[1]) or key == old:
        return False
    free = False
    for part, old_part in zip(*(new[1], was[1])):
        if _free(part):
            name = part[:-len(SIZE_FREE)]  # "" or "seed="
            if not old_part.startswith(name) or old_part[len(name):].startswith(SIZE_FREE):
                return False
            free = True
        elif part != old_part:
            return False
    return free


def _parts(key: str) -> tuple[str, list[str]] | None:
    app, parenthesis, rest = key.partition("(")
    if not parenthesis or not rest.endswith(")") or "…#" in key or not app:
        return None
    return app, _split(rest[:-1])


def _free(part: str) -> bool:
    return part == SIZE_FREE or (part.endswith("=" + SIZE_FREE) and "=" not in part[:-len(SIZE_FREE) - 1])
