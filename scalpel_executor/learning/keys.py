"""Profile keys: which earlier runs a task's footprint and run time can be learned from.

A key is the app's qualified name plus the *shape* of its arguments, never their values::

    examples.kernels.matmul(~2048)              matmul(2000)
    examples.kernels.matmul(~215)               matmul(200)      -> a different profile
    mypkg.fit(f8[~1024x3],mode=fast)            fit(np.zeros((1000, 3)), mode="fast")
    mypkg.normalise({cpu:num,name:str,t0:num},~64)   normalise(<an upstream task's dict>, 64)
    mypkg.simulate(n<16)                        simulate(seed) for seeds 0 to 15
    mypkg.reduce(inputs=8)                      reduce(inputs=[eight futures' results])
    montage.add(inputs=~64[~256MiB])            64 File inputs of 4 MiB
    wf.generic_shell_app[blastall](str,inputs=1,outputs=1)
                                                generic_shell_app("bin/blastall -p blastn ...", inputs=[f], outputs=[g])

What enters the shape, and why:

- numbers (an argument, or in a short tuple): bucketed on a log scale, four buckets per doubling
  (values within about ±9% share a bucket). Run times and footprints grow with sizes smoothly, so
  nearby sizes share what was learned while 200 and 2000 do not. Integers below 16 become
  ``n<16``: they are as often seeds, CPU numbers and indices as sizes, so they split a profile
  only when the measurements show they change it (:mod:`~scalpel_executor.learning.refine`); the
  call's *exact* key, with them as given, is what such a split keys by.
- arrays (``shape`` and ``dtype``): dtype and bucketed shape; data frames: type and bucketed
  shape; short tuples (up to 4) element by element.
- strings: a word such as ``"gemm"`` or ``"jacobi-2d"`` verbatim when it is an argument (it
  usually names a mode or a kernel); a path to an existing file of 1 MiB or more
  (:data:`FILE_FLOOR`) by its bucketed size; anything else ``str`` (a smaller file, or an output
  path not yet written, too, so the key is the same before and after the workflow writes it),
  and a long one (256 characters or more) ``str`` with its bucketed length.
- what an upstream task returned (dicts, lists, sets, longer tuples): the *kind* of each value,
  never the value: a small dict by its field names and their kinds (``num``, ``bool``, ``str``,
  arrays by shape, files by size), other containers by bucketed length plus, when they hold
  arrays, bytes, files or long strings, the bucketed total size (``list8[~64MiB]``). A CPU number,
  a timestamp or a task name in a result therefore never splits a key.
- Parsl ``File`` objects: the bucketed size of the local file when it exists and holds 1 MiB or
  more, else ``file``; ``inputs=`` (already
  the upstream results when the executor sees them) by count and total size; ``outputs=`` by
  count; Parsl's own keyword arguments (``parsl_resource_specification``, ``walltime``,
  ``stdout``/``stderr`` and the monitoring ids) are left out.
- a bash app's command: the program it runs, in brackets after the app's name, and the command
  itself as ``str`` whatever its length. One bash app often runs many programs (WfCommons'
  generated Parsl workflows make every task ``generic_shell_app(cmd, inputs, outputs)``), and
  what one program learned says nothing about another; its arguments (file names, ids) say nothing
  the program does not. The command is the string passed to a parameter named ``cmd``,
  ``command``, ``cmdline`` or ``command_line`` (:data:`COMMAND_PARAMETERS`), by position or by
  keyword: any other string may be data the app formats into its command (a file name), and an app
  that builds its command keeps the key it had. The program is the basename of the first real
  program word (:func:`~scalpel_executor.learning.commands.command_program`: wrappers such as
  ``env``, ``time``, ``nice``, ``timeout`` and ``cd dir &&`` skipped; for ``python``, ``bash``, ``Rscript`` and ``perl``, the
  script). A command that names none (empty, ``$PROG``) keeps the key it had too. The app is
  still the app (the level the estimates fall back to), so keys written before this rule, which
  have no program, count in its pooled profile.

Arguments that do not change a task's size (a seed, a label, an output name) can be declared
*size-free* for an app (``@app_hints(size_free=("seed",))``, :func:`~scalpel_executor.learning.hints.app_hints`):
their value is ``*`` in both keys, so seeds 100 to 119 share ``fft_peak(~512,*)`` where they split
into ``fft_peak(~512,~108)`` and ``fft_peak(~512,~128)``. The declaration rides on the user's
function (:data:`APP_HINTS`), which Parsl's other executors never read.

Users override all of this with the ``profile_key`` resource hint or the executor's
``profile_key=`` function. Keys are plain strings; nothing here touches the profile store.
"""

from __future__ import annotations

import functools
import hashlib
import math
import numbers
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from scalpel_executor.core.units import format_size
from scalpel_executor.learning.commands import command_program

#: The attribute :func:`~scalpel_executor.learning.hints.app_hints` sets on an app's function: a
#: dict with ``specification`` (hints for every call) and ``size_free`` (argument names).
APP_HINTS = "__scalpel_hints__"
SIZE_FREE = "*"  # a size-free argument's value in a key
MAX_KEY_LENGTH = 240
SMALL = "n<16"  # an integer below 16 in a shape key
SMALL_LIMIT = 16
LONG_STRING = 256  # characters: a shorter string in a key is "str", a longer one also has its length
#: Bytes from which a file's size enters a key. A smaller one cannot change a footprint that
#: matters, and a path the workflow itself writes (an output named by a string or a File) would
#: otherwise key one way before it exists and another after: a second run, or a retry, then
#: learned nothing from the first.
FILE_FLOOR = 2**20
_WORD = re.compile(r"^[A-Za-z][A-Za-z0-9_+\-]{0,31}$")
_PARSL_KWARGS = {"parsl_resource_specification", "walltime", "stdout", "stderr", "inputs", "outputs"}
_SHORT_TUPLE = 4
_SMALL_DICT = 8
_DEPTH = 3
_BULK_SCAN = 64  # elements of a container whose sizes are added up (an eighth of that a level deeper); the
# rest is extrapolated, so a list of 100 lists of 100 lists costs about 1 ms at submit, not 200 ms


def _nearest_power(value: float) -> float:
    return 2.0 ** (round(math.log2(value) * 4) / 4)  # four buckets per doubling: about ±9 % each


def representative(value: float) -> float:
    """The value a positive number's bucket stands for: itself when an integer below 16, else 2^(k/4)
    for the nearest k."""
    if float(value).is_integer() and value < SMALL_LIMIT:
        return float(value)
    return _nearest_power(value)


def bucket(value: float) -> str:
    """A number's bucket: exact below 16, else ``~`` and 2^(k/4) rounded, four buckets per doubling.

    >>> bucket(3), bucket(200), bucket(210), bucket(2000), bucket(-0.5)
    ('3', '~215', '~215', '~2048', '-~0.5')
    """
    if isinstance(value, bool):
        return str(value)
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    if value < 0:
        return "-" + bucket(-value)
    if value == 0:
        return "0"
    if float(value).is_integer() and value < SMALL_LIMIT:
        return str(int(value))
    rounded = representative(value)
    return "~" + (f"{rounded:.0f}" if rounded >= 100 else f"{rounded:.3g}")


def is_small(value: Any) -> bool:
    """Whether a number is written exactly in a key (an integer below 16 either way): ``n<16`` in a shape key."""
    return (isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)
            and float(value).is_integer() and abs(value) < SMALL_LIMIT)


def size_bucket(size: float) -> str:
    """A byte count's bucket, as in ``file~4.0MiB``: four per doubling."""
    if size <= 0:
        return "0"
    return "~" + format_size(_nearest_power(size)).replace(" ", "")


def _weight(size: float) -> float:
    """A size as its bucket's representative, so that a container's total moves only when an element
    changes bucket (and an old key's text gives the same total: learning.migrate)."""
    return _nearest_power(size) if size > 0 else 0.0


def _file_size(path: str) -> int | None:
    """The size of the file at ``path`` when it is at least :data:`FILE_FLOOR`, else None."""
    try:
        size = os.stat(path).st_size
    except OSError:
        return None
    return size if size >= FILE_FLOOR else None


def _file_signature(path: str) -> str:
    size = _file_size(path)
    return "file" if size is None else "file" + size_bucket(size)


def _is_path(value: str) -> bool:
    return ("/" in value or "." in value) and os.path.isfile(value) and _file_size(value) is not None


def _parsl_file(value: Any) -> str | None:
    """The local path of a ``parsl.data_provider.files.File``, else None."""
    filepath = getattr(value, "filepath", None)
    return filepath if isinstance(filepath, str) and hasattr(value, "scheme") else None


def _dims(value: Any) -> tuple | None:
    shape = getattr(value, "shape", None)
    return shape if isinstance(shape, tuple) and all(isinstance(n, int) for n in shape) else None


def _string(value: str, argument: bool) -> str:
    if argument and _WORD.match(value):
        return value
    if _is_path(value):
        return _file_signature(value)
    length = bucket(len(value))
    return "str" + length if float(length.lstrip("~")) >= LONG_STRING else "str"


def _bulk(value: Any, depth: int = 0) -> float:
    """Bytes of data a value carries in arrays, bytes, files and long strings (numbers and short
    strings: 0), each element's size rounded to its bucket (:func:`_weight`)."""
    if isinstance(value, str):
        if _is_path(value):
            return _weight(_file_size(value) or 0)
        return _weight(len(value)) if len(value) >= LONG_STRING else 0.0
    if isinstance(value, (bytes, bytearray, memoryview)):
        return _weight(len(value))
    path = _parsl_file(value)
    if path is not None:
        return _weight(_file_size(path) or 0)
    dims, itemsize = _dims(value), getattr(getattr(value, "dtype", None), "itemsize", None)
    if dims is not None and isinstance(itemsize, int):
        return float(itemsize) * math.prod(representative(n) if n else 0.0 for n in dims)
    nbytes = getattr(value, "nbytes", None)
    if isinstance(nbytes, int) and not isinstance(nbytes, bool):
        return _weight(nbytes)
    if depth >= _DEPTH or isinstance(value, (numbers.Number, type(None))):
        return 0.0
    items = value.values() if isinstance(value, Mapping) else value
    try:
        length, scan = len(items), max(1, _BULK_SCAN >> (3 * depth))
        total = 0.0
        for scanned, item in enumerate(items):
            if scanned == scan:
                return total * length / scanned
            total += _bulk(item, depth + 1)
        return total
    except TypeError:  # not a sized iterable
        return 0.0


def _sized(name: str, value: Any, depth: int) -> str:
    """``list8``, ``dict~64[~1.0GiB]``: a container by length, and by total size when it carries data."""
    bulk = _bulk(value, depth)
    return f"{name}{bucket(len(value))}" + (f"[{size_bucket(bulk)}]" if bulk else "")


def _content(value: Any, depth: int) -> str:
    """The kind of a value inside a container or an upstream result: never the value itself."""
    if value is None:
        return "None"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, numbers.Real):
        return "num"
    if isinstance(value, str):
        return _string(value, argument=False)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return "bytes" + bucket(len(value))
    path = _parsl_file(value)
    if path is not None:
        return _file_signature(path)
    dims = _dims(value)
    if dims is not None:
        dtype = getattr(value, "dtype", None)
        text = "x".join(bucket(n) for n in dims)
        if dtype is not None:
            return f"{getattr(dtype, 'str', str(dtype)).lstrip('<>|=')}[{text}]"
        return f"{type(value).__name__}[{text}]"  # data frames
    if depth < _DEPTH and isinstance(value, Mapping) and len(value) <= _SMALL_DICT:
        items = sorted(value.items(), key=lambda item: str(item[0]))
        return "{" + ",".join(f"{key}:{_content(item, depth + 1)}" for key, item in items) + "}"
    try:
        return _sized(type(value).__name__, value, depth)
    except TypeError:
        return type(value).__name__


def signature(value: Any, exact: bool = False, depth: int = 0) -> str:
    """The shape signature of one argument (see the module docstring).

    ``exact`` keeps integers below 16 as given instead of ``n<16``: the call's exact key.

    >>> signature(2000), signature("gemm"), signature("out/tile_17.fits"), signature((3, 4)), signature(3, exact=True)
    ('~2048', 'gemm', 'str', '(n<16,n<16)', '3')
    >>> signature({"cpu": 3, "name": "lookup-3", "t0": 1805811301.2})
    '{cpu:num,name:str,t0:num}'
    """
    if value is None or isinstance(value, bool):
        return str(value)
    if isinstance(value, numbers.Real):
        return SMALL if is_small(value) and not exact else bucket(value)
    if isinstance(value, str):
        return _string(value, argument=depth == 0)
    if depth < _DEPTH and isinstance(value, tuple) and len(value) <= _SHORT_TUPLE:
        return "(" + ",".join(signature(item, exact, depth + 1) for item in value) + ")"
    return _content(value, depth)


def _unwrap(func: Callable) -> Callable:
    """The user's function behind Parsl's wrappers (timeouts, monitoring, staging, bash apps)."""
    for _ in range(32):
        if isinstance(func, functools.partial):
            inner = func.func
            if getattr(inner, "__name__", "") == "remote_side_bash_executor" and func.args and callable(func.args[0]):
                func = func.args[0]
            else:
                func = inner
        elif hasattr(func, "__wrapped__"):
            func = func.__wrapped__
        else:
            break
    return func


#: A script's ``if __name__ == "__main__":``: only a script that has one can be imported for its apps alone.
MAIN_GUARD = re.compile(r"""__name__\s*==\s*["']__main__["']""")


def app_name(func: Callable) -> str:
    """The qualified name of the app behind ``func``, e.g. ``"mypkg.kernels.matmul"``.

    >>> app_name(functools.partial(bucket, 3))
    'scalpel_executor.learning.keys.bucket'
    """
    try:
        return _app_name_once(func)
    except TypeError:  # a callable object that cannot be a dict key
        return _app_name(func)


@functools.lru_cache(maxsize=1024)
def _app_name_once(func: Callable) -> str:  # asked two to four times per task at submit, and at its end
    return _app_name(func)


def _app_name(func: Callable) -> str:
    func = _unwrap(func)
    module = getattr(func, "__module__", None) or "?"
    name = getattr(func, "__qualname__", None) or getattr(func, "__name__", None) or type(func).__name__
    return f"{module}.{name}"


#: Parameters of a bash app that hold its command line. A string passed to one of them is the command
#: the app runs, so its program enters the key; any other string could be a file name or a message
#: the app formats into a command, and keying by its first word would key by the data.
COMMAND_PARAMETERS = frozenset({"cmd", "command", "cmdline", "command_line"})

def _bash_call(func: Callable, args: tuple) -> tuple[Callable, tuple] | None:
    """(the user's function, its arguments) when ``func`` is Parsl's bash-app wrapper, else None.

    Parsl binds the user's function to ``remote_side_bash_executor`` with ``functools.partial``
    (older versions passed it as the first argument instead).
    """
    for _ in range(32):
        if isinstance(func, functools.partial):
            if getattr(func.func, "__name__", "") == "remote_side_bash_executor" and func.args \
                    and callable(func.args[0]):
                return func.args[0], args
            func = func.func
        elif getattr(func, "__name__", "") == "remote_side_bash_executor":
            return (args[0], args[1:]) if args and callable(args[0]) else None
        elif hasattr(func, "__wrapped__"):
            func = func.__wrapped__
        else:
            return None
    return None


def _command_slot(user: Callable, args: tuple, kwargs: Mapping[str, Any]) -> int | str | None:
    """Where a bash app's command line is among its arguments: a position, a keyword, or None
    when no :data:`COMMAND_PARAMETERS` parameter holds a string (the app builds its command)."""
    code = getattr(_unwrap(user), "__code__", None)
    if code is not None:
        for position, name in enumerate(code.co_varnames[:min(code.co_argcount, len(args))]):
            if name in COMMAND_PARAMETERS and isinstance(args[position], str):
                return position
    return next((name for name in sorted(COMMAND_PARAMETERS) if isinstance(kwargs.get(name), str)), None)


def _command(func: Callable, args: tuple, kwargs: Mapping[str, Any]) -> tuple[tuple, tuple[int | str, str] | None]:
    """(the user's arguments, (where the command is, its program) or None) of a call."""
    call = _bash_call(func, args)
    if call is None:
        return args, None
    user, args = call
    slot = _command_slot(user, args, kwargs)
    if slot is None:
        return args, None
    program = command_program(args[slot] if isinstance(slot, int) else kwargs[slot])
    return args, (slot, program) if program else None


@dataclass(frozen=True)
class Keys:
    """The two keys of one call: ``shape`` (integers below 16 as ``n<16``) and ``exact`` (as given).

    They are equal when the call has no such integer. A profile is kept under ``shape`` until
    the measurements of the exact keys under it differ (:mod:`~scalpel_executor.learning.refine`).
    """

    shape: str
    exact: str


def _limited(key: str) -> str:
    if len(key) <= MAX_KEY_LENGTH:
        return key
    digest = hashlib.sha1(key.encode()).hexdigest()[:12]
    return f"{key[: MAX_KEY_LENGTH - 14]}…#{digest}"


def declared(func: Callable) -> Mapping[str, Any]:
    """What :func:`~scalpel_executor.learning.hints.app_hints` declared for the app behind ``func``
    (through Parsl's wrappers), or an empty mapping. Read twice per task at submit (its hints, its
    key), so the walk through the wrappers is made once per function."""
    try:
        return _declared_once(func)
    except TypeError:  # a callable object that cannot be a dict key
        return _declared(func)


@functools.lru_cache(maxsize=1024)
def _declared_once(func: Callable) -> Mapping[str, Any]:
    return _declared(func)


def forget_declared() -> None:
    """Read every function's declaration again (``app_hints`` calls it when it marks one)."""
    _declared_once.cache_clear()


def _declared(func: Callable) -> Mapping[str, Any]:
    for _ in range(32):
        found = getattr(func, APP_HINTS, None)
        if isinstance(found, Mapping):
            return found
        if isinstance(func, functools.partial):
            inner = func.func
            func = func.args[0] if getattr(inner, "__name__", "") == "remote_side_bash_executor" and func.args \
                and callable(func.args[0]) else inner
        elif hasattr(func, "__wrapped__"):
            func = func.__wrapped__
        else:
            break
    return {}


def _size_free_positions(user: Callable, count: int, names: frozenset[str]) -> set[int]:
    """Positions among the first ``count`` arguments of ``user`` whose parameters are in ``names``."""
    if not names:  # most apps: nothing declared size-free, and no walk through the wrappers
        return set()
    code = getattr(_unwrap(user), "__code__", None)
    if code is None:
        return set()
    return {position for position, name in enumerate(code.co_varnames[:min(code.co_argcount, count)])
            if name in names}


def _key(func: Callable, args: tuple, kwargs: Mapping[str, Any], exact: bool,
         command: tuple[int | str, str] | None, size_free: frozenset[str] = frozenset()) -> str:
    """``command``: where a bash app's command is and its program; the command is then ``str``
    whatever its length, because its arguments (file names, ids) say nothing the program does not.
    ``size_free``: parameter names whose values are :data:`SIZE_FREE` (declared so for the app)."""
    slot, program = command or (None, None)
    free = _size_free_positions(func, len(args), size_free)
    parts = ["str" if position == slot else SIZE_FREE if position in free else signature(arg, exact)
             for position, arg in enumerate(args)]
    for name in sorted(kwargs):
        value = kwargs[name]
        if name.startswith("_parsl") or name in _PARSL_KWARGS and name not in ("inputs", "outputs"):
            continue
        if name in size_free:
            parts.append(f"{name}={SIZE_FREE}")
        elif name == "inputs":  # Parsl has replaced each future by its result: count them and weigh their data
            try:
                parts.append("inputs=" + _sized("", value, 0))
            except TypeError:
                parts.append(f"inputs={_content(value, 0)}")
        elif name == "outputs":
            parts.append(f"outputs={len(value)}")
        elif name == slot:
            parts.append(f"{name}=str")
        else:
            parts.append(f"{name}={signature(value, exact)}")
    app = app_name(func) + (f"[{program}]" if program else "")
    return _limited(f"{app}({','.join(parts)})")


def profile_keys(func: Callable, args: tuple = (), kwargs: Mapping[str, Any] | None = None) -> Keys:
    """Both keys of one call (:class:`Keys`).

    >>> keys = profile_keys(bucket, (3,))
    >>> keys.shape.endswith("bucket(n<16)"), keys.exact.endswith("bucket(3)")
    (True, True)
    """
    kwargs = kwargs or {}
    size_free = frozenset(declared(func).get("size_free", ()))
    args, command = _command(func, tuple(args), kwargs)
    shape = _key(func, args, kwargs, False, command, size_free)
    exact = _key(func, args, kwargs, True, command, size_free) if SMALL in shape else shape
    return Keys(shape, exact)


def profile_key(func: Callable, args: tuple = (), kwargs: Mapping[str, Any] | None = None) -> str:
    """The profile key of one call: ``app_name(func)`` and the shape of its arguments (``Keys.shape``).

    >>> profile_key(bucket, (2000,)) == profile_key(bucket, (2100,)) != profile_key(bucket, (200,))
    True
    """
    return profile_keys(func, args, kwargs).shape
