"""``scalpel profile run``: the paper's pre-run, measuring an app on sample inputs into the profile store.

::

    scalpel profile run MODULE:FUNC [ARG ...] [--kw NAME=VALUE] [--repeat N] [--key KEY] [--widths 1,2]

    load_app(MODULE:FUNC) ─ a ScalpelExecutor of one pinned worker, every call measured, none that
    imported modules stored ─ --repeat calls timed the app alone ─ [--widths: _measure_widths, rounds
    at each core count, interleaved ─ serial fractions] ─ the store, under the key the executor computes

The command's options and exit status are ``scalpel_executor.cli.profile``'s (``add_command``).
"""

from __future__ import annotations

import argparse
import ast
import concurrent.futures
import contextlib
import difflib
import importlib
import inspect
import json
import os
import shlex
import sys
import traceback
from collections.abc import Callable, Sequence
from dataclasses import asdict
from typing import Any

from scalpel_executor.cli.common import CommandFailed
from scalpel_executor.cli.profile_store import fmt_bytes, fmt_seconds, named_store, writing_store
from scalpel_executor.learning.keys import MAIN_GUARD, app_name
from scalpel_executor.learning.migrate import app_of
from scalpel_executor.learning.store import Observation
from scalpel_executor.runtime.driver.summary_words import PLACEHOLDERS


def _literal(text: str) -> Any:
    """``2000`` → 2000, ``'[1, 2]'`` → [1, 2], anything else stays a string."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def _keyword_like(function, value: str) -> str | None:
    """The name in an argument ``NAME=VALUE`` where ``function`` takes a keyword of that name, else None."""
    name, equals, _ = value.partition("=")
    if not (equals and name.isidentifier()):
        return None
    try:
        parameters = inspect.signature(function).parameters
    except (TypeError, ValueError):  # a builtin without a signature
        return None
    keywords = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())
    return name if name in parameters or keywords else None


class _WorkflowAtImport(BaseException):
    """Raised from a task submitted while the module is imported; a BaseException, so that the
    module's own ``except Exception:`` does not swallow it."""


@contextlib.contextmanager
def _no_workflow_at_import(module_name: str):
    """Refuse a Parsl task submitted while ``module_name`` is imported: a script that runs its
    workflow at import would wait for its own tasks forever, for serialising an app imports the
    module its import holds (dill). A module that only loads a configuration imports as before;
    one refused has its DataFlowKernel cleaned up."""
    import parsl
    from parsl.dataflow.dflow import DataFlowKernel

    started: list = []

    def refuse(self, *args, **kwargs):
        started.append(self)
        raise _WorkflowAtImport()

    submit = DataFlowKernel.submit
    DataFlowKernel.submit = refuse
    try:
        yield
    except _WorkflowAtImport:
        for dfk in dict.fromkeys(started):
            with contextlib.suppress(Exception):
                dfk.cleanup()
        with contextlib.suppress(Exception):
            parsl.clear()
        raise ValueError(f"importing module {module_name!r} runs a Parsl workflow (it submits a task), whose "
                         f"tasks would wait for the import forever: put the workflow under "
                         f"'if __name__ == \"__main__\":' so its apps can be imported alone") from None
    finally:
        DataFlowKernel.submit = submit


def load_app(target: str) -> tuple[Callable, Callable, dict]:
    """``"module:function"`` or ``"path/to/script.py:function"`` → (the user's function, what an
    executor runs for a call of it, the keyword defaults a call adds): for a bash app, Parsl's
    wrapper that runs the command line the function returns, with the app's defaults (``stdout``,
    ``outputs``, ...) as ``BashApp`` passes them, so the run is the command's, not the line's
    formatting; else the function itself."""
    module_name, _, attribute = target.rpartition(":")
    if not module_name or not attribute:
        raise ValueError(f"expected MODULE:FUNCTION, e.g. mypkg.kernels:matmul, or FILE.py:FUNCTION, got {target!r}")
    folder = os.getcwd()
    if module_name.endswith(".py"):  # a script's file: imported from its folder, as `python FILE` runs it
        if not os.path.isfile(module_name):
            raise ValueError(f"no file {module_name!r} (from {target!r}) in {folder}")
        folder, module_name = os.path.split(os.path.abspath(module_name))
        module_name = module_name[:-3]
        if not module_name.isidentifier():
            raise ValueError(f"{target!r}: a file named {module_name + '.py'!r} cannot be imported as a module")
    if folder not in sys.path:
        sys.path.insert(0, folder)
    try:
        with _no_workflow_at_import(module_name):
            module = importlib.import_module(module_name)
    except ImportError as error:
        raise ValueError(f"cannot import module {module_name!r}: {error}") from None
    app = module
    for part in attribute.split("."):
        try:
            app = getattr(app, part)
        except AttributeError:
            raise ValueError(f"module {module_name!r} has no attribute {attribute!r}") from None
    if not callable(getattr(app, "func", app)):
        raise ValueError(f"{target!r} is not callable")
    return runnable(app)


def runnable(app: Callable) -> tuple[Callable, Callable, dict]:
    """A Parsl app or a plain function → (the user's function, what an executor runs for a call of
    it, the keyword defaults a call adds; :func:`load_app`)."""
    from parsl.app.bash import BashApp

    function = getattr(app, "func", app)  # a Parsl app wraps the user's function
    if isinstance(app, BashApp):
        return function, app.wrapped_remote_function, dict(app.kwargs)
    return function, function, {}


def widths_domain() -> tuple[int, ...]:
    """The CPUs ``--widths`` runs on: the largest LLC domain of this machine's cores that this
    process may use (one CPU per core), as the executor detects them: a task's width never spans two."""
    from scalpel_executor.host.sysfs import detect_topology

    return max((domain.cpus for domain in detect_topology().domains), key=len)


def widths_list(text: str) -> tuple[int, ...]:
    """An argparse ``type`` for ``--widths``: two or more distinct core counts, comma-separated, each
    at least 1 and at most the cores of :func:`widths_domain`; sorted, the narrowest first."""
    try:
        widths = tuple(sorted({int(part) for part in text.split(",") if part.strip()}))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected core counts separated by commas, such as 1,2, "
                                         f"got {text!r}") from None
    cores = len(widths_domain())
    if widths and (widths[0] < 1 or widths[-1] > cores):  # first: "64" on a 2-core machine is out of range
        raise argparse.ArgumentTypeError(f"each core count must be between 1 and the {cores} cores of this machine's "
                                         f"largest cache domain that this process may use, got {text!r}")
    if len(widths) < 2:
        raise argparse.ArgumentTypeError(f"needs at least two different core counts to compare, got {text!r}")
    return widths


def _measure_widths(function, positional: list, keywords: dict, key: str, widths: tuple[int, ...], repeats: int,
                    target: str, quiet: bool) -> list[float]:
    """Run ``function`` on each of ``widths`` cores of one LLC domain, interleaved, in ``repeats``
    rounds, its thread pools sized to its cores as the executor sizes a task's; each wider run's
    wall time over the narrowest run's of the same round reads one serial fraction
    (:func:`~scalpel_executor.core.widths.serial_fraction_from`). A round in which a run was a
    worker's first of the app (``stats["cold"]``: it imported modules) is not read and is run
    again, up to ``len(widths)`` times: a cold narrow run read a serial fraction of 0.03 where the
    warm rounds read 0.19 (numpy's matrix product on two cores). Nothing is stored here: the runs
    go through an executor with a store of its own in memory, so the wider runs' times do not
    join the key's run time (kept at its narrowest width)."""
    from scalpel_executor.core.batching import Batching
    from scalpel_executor.core.widths import serial_fraction_from
    from scalpel_executor.learning.sampling import Sampling
    from scalpel_executor.runtime.driver.executor import ScalpelExecutor

    cpus = list(widths_domain()[:widths[-1]])
    executor = ScalpelExecutor(label="profile-widths", profiles=False, batching=Batching(window=0.0),
                               topology=[cpus],  # one domain; no footprint probe beside the runs
                               sampling=Sampling(measure_first=0, measure_every=0, remeasure_drift=None))
    readings, read, rounds, slower = [], 0, 0, 0
    executor.start()
    try:
        while read < repeats and rounds < repeats + len(widths):
            rounds += 1
            wall, cold = {}, False
            for width in widths:
                future = executor.submit(function, {"profile_key": key, "cores": width, "max_cores": None},
                                         *positional, **keywords)
                try:
                    future.result()
                except (Exception, SystemExit) as error:
                    raise CommandFailed(_failure(target, error, rounds, repeats)) from None
                stats = executor.records[-1].stats
                wall[width], cold = stats.get("wall"), cold or bool(stats.get("cold"))
            if not cold:
                read += 1
                narrow = wall[widths[0]]
                ratios = {width: wall[width] / narrow for width in widths[1:] if narrow and wall[width]}
                readings += [serial_fraction_from(ratio, widths[0], width) for width, ratio in ratios.items()]
                slower += any(ratio > 1 for ratio in ratios.values())
            if not quiet:
                print(f"widths round {rounds}: "
                      + ", ".join(f"{wall[w]:.3g} s on {w} core{'s' if w != 1 else ''}" for w in widths)
                      + (" (a worker's first call of the app: not read)" if cold else ""))
    finally:
        executor.shutdown()
    if slower and not quiet:  # read as no gain (a serial fraction of 1), which may be the host's doing
        print(f"note: in {slower} of {read} rounds a wider run took longer than the narrowest, read as no "
              f"speed-up; other processes may share these cores (load average {os.getloadavg()[0]:.1f} over "
              f"{os.cpu_count()} CPUs): measure again on an idle machine if the app should gain")
    return [reading for reading in readings if reading is not None]


def _refuse_placeholders(*values: Any) -> None:
    """Refuse the run summary's advice copied as is: a value that is one of its placeholders."""
    pasted = [value for value in values if isinstance(value, str) and value in PLACEHOLDERS]
    if pasted:
        raise ValueError(f"{pasted[0]} stands for {PLACEHOLDERS[pasted[0]]}: write yours in its place")


def cmd_run(args: argparse.Namespace) -> int:
    """The paper's pre-run, for users who want one: measure an app on sample inputs, store it."""
    _refuse_placeholders(args.target, *args.args, args.key)
    # Parsl loads only for `profile run`, not for the commands that only read or write the store.
    function, submitted, defaults = load_app(args.target)
    for value in args.args:  # seed=3 given as an argument arrives as the string 'seed=3'
        if (name := _keyword_like(function, value)) is not None:
            raise ValueError(f"argument {value!r} would be passed as the string {value!r}; "
                             f"for the keyword argument {name}, give --kw {value}")
    positional = [_literal(value) for value in args.args]
    keywords = dict(defaults)
    for item in args.kw:
        name, equals, value = item.partition("=")
        if not equals or not name.isidentifier():
            raise ValueError(f"--kw expects NAME=VALUE, got {item!r}")
        keywords[name] = _literal(value)
    measured = _measure(function, submitted, positional, keywords, args, args.target)
    if args.json:
        print(json.dumps(measured, indent=1))
    return 0


def measure_app(app: Callable, *args: Any, repeat: int = 1, key: str | None = None,
                widths: Sequence[int] | None = None, store: str | os.PathLike | None = None,
                quiet: bool = False, **kwargs: Any) -> dict | None:
    """``scalpel profile run`` from Python, for an app a notebook or a script defines: call ``app``
    (a Parsl python or bash app, or a plain function) on ``args`` and ``kwargs`` ``repeat`` times in
    a pinned worker with the probe on, and store its run time and footprint under the key the
    executor computes for the same call (or ``key``); with ``widths`` (e.g. ``(1, 2)``), also its
    speed-up, which a malleable app (``max_cores``) starts its widths from. ``store``: the profile
    store's path (default ``$SCALPEL_PROFILE_STORE`` or the user's). Prints a line per run unless
    ``quiet``; returns what was stored (``scalpel profile show --json``'s fields and ``speedup``).

    A notebook's function is keyed as its workflow's calls are (``__main__.fit(...)``), which the
    command cannot import. Raises ValueError for a bad argument, ``CommandFailed`` (one line) when a
    call fails.
    """
    if not callable(app):
        raise ValueError(f"measure_app needs an app or a function, got {app!r:.80}")
    _refuse_placeholders(*args, key)
    if isinstance(repeat, bool) or not isinstance(repeat, int) or repeat < 1:
        raise ValueError(f"repeat must be a whole number of runs, at least 1, got {repeat!r}")
    if widths is not None:
        try:
            widths = widths_list(",".join(str(width) for width in widths))
        except argparse.ArgumentTypeError as error:
            raise ValueError(f"widths: {error}") from None
    function, submitted, defaults = runnable(app)
    _near_options(function, kwargs)
    options = argparse.Namespace(store=None if store is None else os.fspath(store), key=key, repeat=repeat,
                                 widths=widths, json=quiet)
    return _measure(function, submitted, list(args), {**defaults, **kwargs}, options, app_name(function))


#: measure_app's own keywords; any other is the app's.
MEASURE_OPTIONS = ("repeat", "key", "widths", "store", "quiet")


def _near_options(function: Callable, kwargs: dict) -> None:
    """Refuse a keyword for the app that is a misspelt option of ``measure_app`` (``stor=``): it
    would reach the app, and with ``**kwargs`` there, pass silently into a key of its own."""
    try:
        parameters = inspect.signature(function).parameters
    except (TypeError, ValueError):
        return
    for name in kwargs:
        near = difflib.get_close_matches(name, MEASURE_OPTIONS, n=1, cutoff=0.75)
        if near and name not in parameters:
            raise ValueError(f"{name}= is not an argument of {function.__name__}; did you mean measure_app's "
                             f"{near[0]}=?")


def _measure(function: Callable, submitted: Callable, positional: list, keywords: dict, args: argparse.Namespace,
             target: str) -> dict | None:
    """Run and store as :func:`cmd_run` says (``args``: its options ``store``, ``key``, ``repeat``,
    ``widths``, ``json``: print nothing but what is returned); returns what was stored."""
    from scalpel_executor.core.batching import Batching
    from scalpel_executor.learning.sampling import Sampling
    from scalpel_executor.runtime.driver.executor import ScalpelExecutor

    import parsl

    for stream in ("stdout", "stderr"):  # a bash app's log named by Parsl: no run directory here, none kept
        if type(keywords.get(stream)) is int and keywords[stream] == parsl.AUTO_LOGNAME:
            keywords[stream] = os.devnull
    with writing_store(args, "store what the run measures"):
        pass  # refuse a store that cannot keep the measurement before running anything
    store = named_store(args)
    executor = ScalpelExecutor(label="profile-run", profiles=store, batching=Batching(window=0.0),
                               topology=[[min(os.sched_getaffinity(0))]],
                               # every repeat measured, not a sample; a call that imported modules not stored
                               sampling=Sampling(measure_every=1, learn_cold=False))
    executor.start()
    try:
        # its narrowest width (an app marked malleable too: its max_cores hint is set aside), under
        # --key or else the key the executor computes for this call
        spec = {"max_cores": None, **({"profile_key": args.key} if args.key else {})}
        stored = cold = 0
        while stored < args.repeat:
            future = executor.submit(submitted, spec, *positional, **keywords)
            try:
                future.result()
            except (Exception, SystemExit) as error:
                raise CommandFailed(_failure(target, error, stored + cold + 1, args.repeat + cold)) from None
            stats = executor.records[-1].stats
            if stats.get("cold"):
                cold += 1
                if cold > args.repeat:
                    raise CommandFailed(f"{target} imported modules on each of its {cold} calls, so none timed "
                                        f"the app alone and nothing was stored; import them at the module's top")
            else:
                stored += 1
            if not args.json:
                print(f"{'call' if stats.get('cold') else f'run {stored}/{args.repeat}'}: "
                      f"{stats.get('wall', 0):.3g} s, footprint {fmt_bytes(stats.get('footprint'))} "
                      f"({stats.get('footprint_source', 'not measured')})"
                      + ("; it imported modules (a worker's first call of the app): not stored, run again"
                         if stats.get("cold") else ""))
    finally:
        executor.shutdown()
    key = executor.records[-1].profile_key
    app = (app_of(args.key) if args.key else None) or app_name(function)  # --key: the workflow's app
    if app != app_name(function):
        store.set_app(key, app)
    if args.widths:
        readings = _measure_widths(submitted, positional, keywords, key, args.widths, args.repeat, target,
                                   args.json)
        store.record([Observation(key, app, serial=reading) for reading in readings])
    profile, speedup = store.get(key), store.speedup(key)
    store.close()
    script_key = None if args.key or function.__module__ == "__main__" else as_script_key(function, key)
    measured = {**profile.to_dict(), "speedup": None if speedup is None else asdict(speedup)} if profile else None
    if not args.json and profile is not None:
        print(f"stored {key}: run time {fmt_seconds(profile.runtime)}, footprint {fmt_bytes(profile.footprint)} "
              f"after {profile.runs} run{'s' if profile.runs != 1 else ''}")
        if args.widths and speedup is not None:
            at = ", ".join(f"{speedup.speedup(w):.2f}x on {w}" for w in args.widths[1:])
            print(f"stored its speed-up: serial fraction {speedup.serial_fraction:.3f} over {speedup.readings} "
                  f"readings (Amdahl: {at} cores); a run's width rule starts from it")
        if script_key is not None:
            module = function.__module__
            path = target.rpartition(":")[0]
            command = f"python {shlex.quote(path)}" if path.endswith(".py") else \
                f"python -m {module}" if "." in module else f"python {module}.py"
            print(f"note: {module} is a script; run as `{command}` its tasks' key is {script_key}: "
                  f"add --key {shlex.quote(script_key)} to store this there")
    return measured


def as_script_key(function, key: str) -> str | None:
    """The key ``function``'s calls have when its module runs as a script (``python pipeline.py``:
    ``__main__.generate(n<16)`` for ``pipeline.generate(n<16)``), where the module has an
    ``if __name__ == "__main__":`` block; else None."""
    module = sys.modules.get(function.__module__)
    prefix = f"{function.__module__}."
    try:
        source = inspect.getsource(module) if module is not None else ""
    except (OSError, TypeError):
        return None
    if not key.startswith(prefix) or not MAIN_GUARD.search(source):
        return None
    return "__main__." + key[len(prefix):]


def _failure(target: str, error: BaseException, run: int, runs: int) -> str:
    """One line: how the function of ``profile run`` failed, and where in its own code."""
    # sys.exit() in the function arrives as SystemExit, or wrapped (the worker's TaskExit keeps it
    # as ``exception``).
    exited = next((e for e in (error, getattr(error, "exception", None), error.__cause__)
                   if isinstance(e, SystemExit)), None)
    if exited is not None:
        # After a round trip through Parsl's serializer ``code`` may read None while ``args`` keeps it.
        code = exited.code if exited.code is not None else (exited.args[0] if exited.args else None)
        what = f"called sys.exit({'' if code is None else repr(code)}) instead of returning"
    else:
        what = f"raised {type(error).__name__}: {' '.join(str(error).split())}"
    import parsl  # loaded already: only `profile run` gets here

    machinery = tuple(os.path.dirname(module.__file__) + os.sep for module in (parsl, concurrent.futures))
    machinery += (os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep,)  # the whole package
    frames = [frame for frame in traceback.extract_tb(error.__traceback__)
              if not os.path.abspath(frame.filename).startswith(machinery)]
    where = f" at {frames[-1].filename}:{frames[-1].lineno} in {frames[-1].name}" if frames else ""
    return f"{target} {what}{where} (run {run} of {runs})"
