"""``scalpel profile``: look into, move and prepare the profile store.

::

    scalpel profile list [--prefix P] [--wide]   one line per key: runs, run time, footprint, origin
    scalpel profile show KEY                     every statistic of one key
    scalpel profile export [--prefix P] [-o F]   a scalpel-profile/1 JSON document (stdout or F)
    scalpel profile import FILE|NAME [--prefix]  load a document or a shipped profile (e.g. polybench-xeon-e5620)
    scalpel profile clear (--all | --prefix P | KEY)
    scalpel profile run MODULE:FUNC [ARG ...]    run an app once on sample inputs and store what it measured
        [--widths 1,2]                           and its speed-up on those core counts (a malleable app's)

Every command takes ``--store PATH`` (default: the executor's default store) and ``--json``.

Exit status: 0 done; 2 bad input, or a store that cannot be written (``import``, ``clear`` and
``run`` refuse a corrupt or read-only store with one line saying why, rather than change a copy in
memory that is lost at exit); 1 when the function of ``profile run`` raised or called ``sys.exit``.
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
import logging
import os
import re
import shlex
import sys
import time
import traceback
from collections.abc import Iterator
from dataclasses import asdict
from typing import Any

from scalpel_executor.cli.common import CommandFailed, at_least
from scalpel_executor.core.units import format_size
from scalpel_executor.experiments.tables import format_table
from scalpel_executor.learning.exchange import read_json_object, shipped_document
from scalpel_executor.learning.critical_path import CriticalPathStore
from scalpel_executor.learning.keys import app_name
from scalpel_executor.learning.store import Observation, ProfileStore, default_path


def _store(args: argparse.Namespace) -> ProfileStore:
    return ProfileStore(args.store or default_path())


def _existing(args: argparse.Namespace) -> ProfileStore:
    """The store, for a command that only reads it: ValueError naming the path when no file is there,
    rather than creating one (a mistyped --store would otherwise look like an empty store)."""
    path = args.store or default_path()
    if path != ":memory:" and not os.path.exists(os.path.expanduser(str(path))):
        raise ValueError(f"no profile store at {path}: nothing has been learned there yet (a run with "
                         f"profiles={str(path)!r} writes one), or the path is mistyped")
    return ProfileStore(path)


def _unwritable(store: ProfileStore, doing: str) -> ValueError:
    return ValueError(
        f"cannot {doing}: the profile store {store.path} cannot be written ({store.problem}), so nothing was "
        "saved; move the file aside or pass --store with a writable file path"
    )


class _Quiet(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return False


@contextlib.contextmanager
def _writing(args: argparse.Namespace, doing: str) -> Iterator[ProfileStore]:
    """The store, for a command that changes it: ValueError unless the change reaches the file.

    The store's own warning about falling back to memory is held back: the error says it instead.
    """
    store_logger = logging.getLogger("scalpel_executor.learning.store")
    quiet = _Quiet()
    store_logger.addFilter(quiet)
    try:
        with _store(args) as store:
            if not store.persistent:
                raise _unwritable(store, doing)
            yield store
            if not store.persistent:  # it failed over to memory while writing
                raise _unwritable(store, doing)
    finally:
        store_logger.removeFilter(quiet)


def _fmt_seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g} s"


def _fmt_bytes(value: float | None) -> str:
    return "-" if value is None else format_size(value)


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
    if len(key) <= width:
        return key
    name, paren, shape = key.partition("(")
    app, bracket, program = name.partition("[")
    head, tail = app, bracket + program + paren + shape
    parts = app.split(".")
    while len(parts) > 1 and len(head) + len(tail) > width:  # module components first
        parts = parts[1:]
        head = "…" + ".".join(parts) if len(parts) > 1 else parts[0]
    text = head + tail
    if len(text) <= width:
        return text
    kept = len(head) + len(bracket + program + paren)
    if kept < width:  # the shape's end goes
        return text[:width - 1] + "…"
    return "…" + (head + bracket + program)[-(width - 1):]  # the app's name gives its start, the program stays


def cmd_list(args: argparse.Namespace) -> int:
    with _existing(args) as store:
        profiles = store.profiles(args.prefix)
        if args.json:
            print(json.dumps([p.to_dict() for p in profiles], indent=1))
            return 0
        print(f"{len(profiles)} profiles in {store.path or ':memory:'}")
        if profiles:
            cells = [[p.key if args.wide else cut_key(p.key), p.runs, _fmt_seconds(p.runtime), _fmt_bytes(p.footprint),
                      p.origin] for p in profiles]
            for line in format_table(["key", "runs", "run time", "footprint", "origin"], cells, right=[1, 2, 3]):
                print(line)
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    with _existing(args) as store:
        profile = store.get(args.key)
        if profile is None:
            near = near_keys(args.key, [p.key for p in store.profiles()])
            also = (f"; did you mean {' or '.join(shlex.quote(key) for key in near)}?" if near else "")
            raise ValueError(f"no profile with key {args.key!r} in {store.path}{also} "
                             f"(`scalpel profile list --wide` shows the keys)")
        learned = _learned_tail(store, args.key)
        speedup = store.speedup(args.key)
        if args.json:
            print(json.dumps({**profile.to_dict(), "critical_path": None if learned is None else learned.to_dict(),
                              "speedup": None if speedup is None else asdict(speedup)}, indent=1))
            return 0
        for name, value in profile.to_dict().items():
            print(f"{name:>15}: {_shown(name, value)}")
        if learned is None:
            print(f"{'critical path':>15}: none learned (no run showed Parsl's graph with this key's tasks)")
        else:
            children = ", ".join(learned.children) or "none"
            print(f"{'critical path':>15}: {learned.tail:.3g} s of work waited for its tasks' results on average "
                  f"({learned.widest[0]:.3g} s with malleable tasks at their widest width by their learned "
                  f"speed-ups; over {learned.runs} run{'s' if learned.runs != 1 else ''}, {learned.tasks} tasks; "
                  f"children: {children})")
        if speedup is None:
            print(f"{'speed-up':>15}: none learned (no malleable run of this key at more cores than its narrowest)")
        else:
            at = ", ".join(f"{speedup.speedup(w):.2f}x on {w}" for w in (2, 4, 8, 16))
            print(f"{'speed-up':>15}: serial fraction {speedup.serial_fraction:.3f} over {speedup.readings} "
                  f"reading{'s' if speedup.readings != 1 else ''} (Amdahl: {at} cores)")
    return 0


def near_keys(wanted: str, keys: list[str], most: int = 3) -> list[str]:
    """The stored keys ``wanted`` may have meant: those holding it (an app's name, ``generate`` for
    ``__main__.generate(n<16)``), else those spelt alike.

    >>> near_keys("generate", ["__main__.generate(n<16)", "__main__.reduce(list~16)"])
    ['__main__.generate(n<16)']
    >>> near_keys("pkg.analyze(~100)", ["pkg.analyse(~100)", "pkg.other(~100)"])
    ['pkg.analyse(~100)']
    """
    holding = [key for key in keys if wanted in key]
    return (holding or difflib.get_close_matches(wanted, keys, n=most, cutoff=0.8))[:most]


def _shown(name: str, value: Any) -> str:
    """A profile field as ``profile show`` prints it: sizes, seconds, a rate, a local time; ``-`` for none.

    >>> _shown("runtime_std", 0.028961742), _shown("peak_rss", 87870668), _shown("llc_miss_rate", 0.1234)
    ('0.029 s', '83.8 MiB', '12.3%')
    >>> _shown("refines", None), _shown("runs", 3)
    ('-', '3')
    """
    if value is None:
        return "-"
    if name.startswith("footprint") and name != "footprint_runs" or name == "peak_rss":
        return _fmt_bytes(value)
    if name.startswith("runtime"):
        return _fmt_seconds(value)
    if name == "llc_miss_rate":
        return f"{value:.1%}"
    if name == "updated":
        return time.strftime("%Y-%m-%d %H:%M:%S %Z", time.localtime(value))
    return str(value)


def _learned_tail(store: ProfileStore, key: str):
    """The key's learned tail (learning.critical_path), or None; never fails the command."""
    if not store.persistent:
        return None
    try:
        tails = CriticalPathStore(store.path)
        try:
            return tails.get([key]).get(key)
        finally:
            tails.close()
    except Exception:  # noqa: BLE001 - the profile is shown whatever the side table holds
        return None


def cmd_export(args: argparse.Namespace) -> int:
    with _existing(args) as store:
        document = store.export(args.prefix, name=args.name)
    text = json.dumps(document, indent=1)
    if args.output:
        with open(args.output, "w") as stream:
            stream.write(text + "\n")
        print(f"exported {len(document['tasks'])} profiles to {args.output}", file=sys.stderr)
    else:
        print(text)
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    if os.path.exists(args.source):
        document = read_json_object(args.source, "profile document")
        with ProfileStore(":memory:") as check:  # a malformed file is named before the store is touched
            try:
                check.import_document(document, prefix=args.prefix)
            except ValueError as error:
                raise ValueError(f"{args.source}: {error}") from None
    else:
        document = shipped_document(args.source)
    with _writing(args, "import profiles") as store:
        count = store.import_document(document, prefix=args.prefix)
        where = store.path
    print(f"imported {count} profiles into {where}" + (f" under {args.prefix!r}" if args.prefix else ""))
    return 0


def cmd_clear(args: argparse.Namespace) -> int:
    if not (args.all or args.prefix or args.key):
        raise ValueError("say what to clear: a KEY, --prefix PREFIX, or --all")
    with _writing(args, "clear profiles") as store:
        if args.key:
            removed = store.delete(args.key, exact=True)
        else:
            removed = store.delete("" if args.all else args.prefix)
    print(f"removed {removed} profiles")
    return 0


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


def load_function(target: str):
    """``"package.module:function"`` → the function (the plain function behind a Parsl app)."""
    module_name, _, attribute = target.partition(":")
    if not module_name or not attribute:
        raise ValueError(f"expected MODULE:FUNCTION, e.g. mypkg.kernels:matmul, got {target!r}")
    if module_name.endswith(".py"):
        raise ValueError(f"expected MODULE:FUNCTION, a module's name rather than its file, got {target!r}; "
                         f"try {module_name[:-3].replace(os.sep, '.')}:{attribute}")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise ValueError(f"cannot import module {module_name!r}: {error}") from None
    function = module
    for part in attribute.split("."):
        try:
            function = getattr(function, part)
        except AttributeError:
            raise ValueError(f"module {module_name!r} has no attribute {attribute!r}") from None
    function = getattr(function, "func", function)  # a Parsl app wraps the user's function
    if not callable(function):
        raise ValueError(f"{target!r} is not callable")
    return function


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


def cmd_run(args: argparse.Namespace) -> int:
    """The paper's pre-run, for users who want one: measure an app on sample inputs, store it."""
    # Parsl loads only for `profile run`, not for the commands that only read or write the store.
    from scalpel_executor.core.batching import Batching
    from scalpel_executor.learning.sampling import Sampling
    from scalpel_executor.runtime.driver.executor import ScalpelExecutor

    function = load_function(args.target)
    for value in args.args:  # seed=3 given as an argument arrives as the string 'seed=3'
        if (name := _keyword_like(function, value)) is not None:
            raise ValueError(f"argument {value!r} would be passed as the string {value!r}; "
                             f"for the keyword argument {name}, give --kw {value}")
    positional = [_literal(value) for value in args.args]
    keywords = {}
    for item in args.kw:
        name, equals, value = item.partition("=")
        if not equals or not name.isidentifier():
            raise ValueError(f"--kw expects NAME=VALUE, got {item!r}")
        keywords[name] = _literal(value)
    with _writing(args, "store what the run measures"):
        pass  # refuse a store that cannot keep the measurement before running anything
    store = _store(args)
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
            future = executor.submit(function, spec, *positional, **keywords)
            try:
                future.result()
            except (Exception, SystemExit) as error:
                raise CommandFailed(_failure(args.target, error, stored + cold + 1, args.repeat + cold)) from None
            stats = executor.records[-1].stats
            if stats.get("cold"):
                cold += 1
                if cold > args.repeat:
                    raise CommandFailed(f"{args.target} imported modules on each of its {cold} calls, so none timed "
                                        f"the app alone and nothing was stored; import them at the module's top")
            else:
                stored += 1
            if not args.json:
                print(f"{'call' if stats.get('cold') else f'run {stored}/{args.repeat}'}: "
                      f"{stats.get('wall', 0):.3g} s, footprint {_fmt_bytes(stats.get('footprint'))} "
                      f"({stats.get('footprint_source', 'not measured')})"
                      + ("; it imported modules (a worker's first call of the app): not stored, run again"
                         if stats.get("cold") else ""))
    finally:
        executor.shutdown()
    key = executor.records[-1].profile_key
    if args.widths:
        readings = _measure_widths(function, positional, keywords, key, args.widths, args.repeat, args.target,
                                   args.json)
        store.record([Observation(key, app_name(function), serial=reading) for reading in readings])
    profile, speedup = store.get(key), store.speedup(key)
    store.close()
    script_key = None if args.key else as_script_key(function, key)
    if args.json:
        print(json.dumps({**profile.to_dict(), "speedup": None if speedup is None else asdict(speedup)}
                         if profile else None, indent=1))
    elif profile is not None:
        print(f"stored {key}: run time {_fmt_seconds(profile.runtime)}, footprint {_fmt_bytes(profile.footprint)} "
              f"after {profile.runs} runs")
        if args.widths and speedup is not None:
            at = ", ".join(f"{speedup.speedup(w):.2f}x on {w}" for w in args.widths[1:])
            print(f"stored its speed-up: serial fraction {speedup.serial_fraction:.3f} over {speedup.readings} "
                  f"readings (Amdahl: {at} cores); a run's width rule starts from it")
        if script_key is not None:
            print(f"note: {function.__module__} is a script; run as `python {function.__module__}.py` its tasks' "
                  f"key is {script_key}: add --key {shlex.quote(script_key)} to store this there")
    return 0


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
    if not key.startswith(prefix) or not re.search(r"""__name__\s*==\s*["']__main__["']""", source):
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


def add_command(commands: argparse._SubParsersAction) -> None:
    profile = commands.add_parser(
        "profile", help="list, show, export, import, clear or measure stored task profiles",
        description=__doc__.split("\n\n")[0] + " Default store: " + str(default_path()) + " ($SCALPEL_PROFILE_STORE).",
    )
    actions = profile.add_subparsers(dest="action", required=True, metavar="ACTION")

    def action(name: str, run, help_text: str) -> argparse.ArgumentParser:
        parser = actions.add_parser(name, help=help_text, description=help_text)
        parser.add_argument("--store", help="the profile store file (default: $SCALPEL_PROFILE_STORE or ~/.local/share/...)")
        parser.add_argument("--json", action="store_true", help="print JSON")
        parser.set_defaults(run=run)
        return parser

    listing = action("list", cmd_list, "one line per stored profile")
    listing.add_argument("--prefix", default="", help="only keys starting with this")
    listing.add_argument("--wide", action="store_true",
                         help=f"show keys whole (else cut to {KEY_WIDTH} characters with an ellipsis)")
    action("show", cmd_show, "every statistic of one profile").add_argument("key", help="the profile key (see `list`)")
    export = action("export", cmd_export, "write profiles as a scalpel-profile/1 JSON document")
    export.add_argument("--prefix", default="", help="only keys starting with this")
    export.add_argument("-o", "--output", help="file to write (default: standard output)")
    export.add_argument("--name", default="profile-store", help="the document's name")
    importer = action("import", cmd_import, "load a scalpel-profile/1 document, or a shipped profile by name")
    importer.add_argument("source", help="a JSON file, or a shipped profile name such as polybench-xeon-e5620")
    importer.add_argument("--prefix", default="", help="prepended to every imported key, e.g. polybench/")
    clear = action("clear", cmd_clear, "remove profiles")
    clear.add_argument("key", nargs="?", help="remove exactly this key")
    clear.add_argument("--prefix", default="", help="remove every key starting with this")
    clear.add_argument("--all", action="store_true", help="remove every profile")
    run = action("run", cmd_run, "run an app once (or --repeat N times) on sample inputs and store its measured profile")
    run.add_argument("target", help="MODULE:FUNCTION (the module is imported from the current directory or sys.path)")
    run.add_argument("args", nargs="*", help="positional arguments, as Python literals where they parse (2000, 'x', [1, 2])")
    run.add_argument("--kw", action="append", default=[], metavar="NAME=VALUE", help="a keyword argument (repeatable)")
    run.add_argument("--repeat", type=at_least(1), default=1, help="runs to measure (default %(default)s)")
    run.add_argument("--key", help="store under this key instead of the computed one")
    run.add_argument("--widths", type=widths_list, metavar="N,N[,...]",
                     help="also measure its speed-up: run it on each of these core counts of one cache domain "
                          "(e.g. 1,2; its thread pools sized to them), interleaved, --repeat times, and store the "
                          "serial fraction each wider run reads, which an app marked malleable (max_cores) starts "
                          "from; for nodes where a run would not try it wider")
