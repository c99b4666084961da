"""Profile keys: which earlier runs a task's footprint and run time can be learned from.

A key is the app's qualified name plus a *size signature* of its arguments::

    examples.kernels.matmul(~2048)              matmul(2000)
    examples.kernels.matmul(~215)               matmul(200)      -> a different profile
    mypkg.fit(f8[~1024x3],mode=fast)            fit(np.zeros((1000, 3)), mode="fast")
    montage.project(file~4.0MiB,file~4.0MiB)    two File inputs of about 4 MiB

What enters the signature, and why:

- numbers: bucketed on a log scale, four buckets per doubling (values within about ±9% share a
  bucket); integers below 16 exactly. Run times and footprints grow with problem sizes smoothly,
  so nearby sizes can share what was learned, while 200 and 2000 cannot.
- arrays (anything with ``shape`` and ``dtype``): dtype and bucketed shape; data frames and other
  sized objects: type name and bucketed length; short tuples element by element; longer
  sequences by bucketed length only.
- strings: a word such as ``"gemm"`` or ``"jacobi-2d"`` verbatim (it usually names a mode or a
  kernel); a path to an existing file by its bucketed size; anything else only by bucketed length,
  because file names and labels are unique per task and would defeat learning.
- Parsl ``File`` objects: the bucketed size of the local file when it exists; ``outputs=`` only
  by count; Parsl's own keyword arguments (``parsl_resource_specification``, ``walltime``,
  ``stdout``/``stderr`` and the monitoring ids) are left out.

Users override all of this with the ``profile_key`` resource hint or the executor's
``profile_key=`` function. Keys are plain strings; nothing here touches the profile store.
"""

from __future__ import annotations

import functools
import hashlib
import math
import os
import re
from collections.abc import Callable, Mapping
from typing import Any

from scalpel_executor.core.units import format_size

MAX_KEY_LENGTH = 240
_WORD = re.compile(r"^[A-Za-z][A-Za-z0-9_+\-]{0,31}$")
_PARSL_KWARGS = {"parsl_resource_specification", "walltime", "stdout", "stderr", "inputs", "outputs"}
_SHORT_TUPLE = 4
_DEPTH = 3


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
    if float(value).is_integer() and value < 16:
        return str(int(value))
    representative = 2.0 ** (round(math.log2(value) * 4) / 4)
    return "~" + (f"{representative:.0f}" if representative >= 100 else f"{representative:.3g}")


def _size_bucket(size: int) -> str:
    if size <= 0:
        return "0"
    return "~" + format_size(2.0 ** (round(math.log2(size) * 4) / 4)).replace(" ", "")


def _file_signature(path: str) -> str:
    try:
        return "file" + _size_bucket(os.stat(path).st_size)
    except OSError:
        return "file"


def signature(value: Any, depth: int = 0) -> str:
    """The size signature of one argument (see the module docstring).

    >>> signature(2000), signature("gemm"), signature("out/tile_17.fits"), signature((3, 4))
    ('~2048', 'gemm', 'str~16', '(3,4)')
    """
    if value is None or isinstance(value, bool):
        return str(value)
    if isinstance(value, (int, float)):
        return bucket(value)
    if isinstance(value, str):
        if _WORD.match(value):
            return value
        if ("/" in value or "." in value) and os.path.isfile(value):
            return _file_signature(value)
        return "str" + bucket(len(value))
    if isinstance(value, (bytes, bytearray, memoryview)):
        return "bytes" + bucket(len(value))
    filepath = getattr(value, "filepath", None)
    if isinstance(filepath, str) and hasattr(value, "scheme"):  # a parsl.data_provider.files.File
        return _file_signature(filepath)
    shape, dtype = getattr(value, "shape", None), getattr(value, "dtype", None)
    if isinstance(shape, tuple) and dtype is not None and all(isinstance(n, int) for n in shape):
        dims = "x".join(bucket(n) for n in shape)
        return f"{getattr(dtype, 'str', str(dtype)).lstrip('<>|=')}[{dims}]"
    if isinstance(shape, tuple) and all(isinstance(n, int) for n in shape):  # data frames
        return f"{type(value).__name__}[{'x'.join(bucket(n) for n in shape)}]"
    if depth < _DEPTH and isinstance(value, tuple) and len(value) <= _SHORT_TUPLE:
        return "(" + ",".join(signature(item, depth + 1) for item in value) + ")"
    if depth < _DEPTH and isinstance(value, Mapping) and len(value) <= 8:
        items = sorted(value.items(), key=lambda item: str(item[0]))
        return "{" + ",".join(f"{key}:{signature(item, depth + 1)}" for key, item in items) + "}"
    try:
        length = len(value)
    except TypeError:
        return type(value).__name__
    return f"{type(value).__name__}{bucket(length)}"


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


def app_name(func: Callable) -> str:
    """The qualified name of the app behind ``func``, e.g. ``"mypkg.kernels.matmul"``.

    >>> app_name(functools.partial(bucket, 3))
    'scalpel_executor.learning.keys.bucket'
    """
    func = _unwrap(func)
    module = getattr(func, "__module__", None) or "?"
    name = getattr(func, "__qualname__", None) or getattr(func, "__name__", None) or type(func).__name__
    return f"{module}.{name}"


def _bash_args(func: Callable, args: tuple) -> tuple:
    """A bash app's executor-side function receives the user's function as its first argument."""
    while hasattr(func, "__wrapped__") and not isinstance(func, functools.partial):
        func = func.__wrapped__
    if getattr(func, "__name__", "") == "remote_side_bash_executor" and args and callable(args[0]):
        return args[1:]
    return args


def profile_key(func: Callable, args: tuple = (), kwargs: Mapping[str, Any] | None = None) -> str:
    """The profile key of one call: ``app_name(func)`` and the size signature of its arguments.

    >>> profile_key(bucket, (2000,)) == profile_key(bucket, (2100,)) != profile_key(bucket, (200,))
    True
    """
    parts = [signature(arg) for arg in _bash_args(func, tuple(args))]
    for name in sorted(kwargs or {}):
        value = kwargs[name]
        if name.startswith("_parsl") or name in _PARSL_KWARGS and name not in ("inputs", "outputs"):
            continue
        if name == "inputs":
            parts.append("inputs=[" + ",".join(signature(item) for item in list(value)[:16]) + "]")
        elif name == "outputs":
            parts.append(f"outputs={len(value)}")
        else:
            parts.append(f"{name}={signature(value)}")
    key = f"{app_name(func)}({','.join(parts)})"
    if len(key) > MAX_KEY_LENGTH:
        digest = hashlib.sha1(key.encode()).hexdigest()[:12]
        key = f"{key[: MAX_KEY_LENGTH - 14]}…#{digest}"
    return key
