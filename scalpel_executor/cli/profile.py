"""``scalpel profile``: look into, move and prepare the profile store.

::

    scalpel profile list [--prefix P] [--wide]   one line per key: runs, run time, footprint, origin
    scalpel profile show KEY                     every statistic of one key
    scalpel profile export [--prefix P] [-o F]   a scalpel-profile/1 JSON document (stdout or F)
    scalpel profile import FILE|NAME [--prefix]  load a document or a shipped profile (e.g. polybench-xeon-e5620)
    scalpel profile clear (--all | --prefix P | KEY)
    scalpel profile run MODULE:FUNC [ARG ...]    run an app once on sample inputs and store what it measured
        (or FILE.py:FUNC, a script's app)
        [--widths 1,2]                           and its speed-up on those core counts (a malleable app's)

Every command takes ``--store PATH`` (default: the executor's default store) and ``--json``.

Exit status: 0 done; 2 bad input, or a store that cannot be written (``import``, ``clear`` and
``run`` refuse a corrupt or read-only store with one line saying why, rather than change a copy in
memory that is lost at exit); 1 when the function of ``profile run`` raised or called ``sys.exit``.
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import shlex
import sys
import time
from dataclasses import asdict
from typing import Any

from scalpel_executor.cli.common import KEY_WIDTH, at_least, cut_keys
from scalpel_executor.cli.profile_run import cmd_run, widths_list
from scalpel_executor.cli.profile_store import existing_store, fmt_bytes, fmt_seconds, writing_store
from scalpel_executor.experiments.tables import format_table
from scalpel_executor.learning.exchange import read_json_object, shipped_document
from scalpel_executor.learning.critical_path import CriticalPathStore
from scalpel_executor.learning.migrate import family_of
from scalpel_executor.learning.store import ProfileStore, default_path


def cmd_list(args: argparse.Namespace) -> int:
    with existing_store(args) as store:
        profiles = store.profiles(args.prefix)
        if args.json:
            print(json.dumps([p.to_dict() for p in profiles], indent=1))
            return 0
        print(f"{len(profiles)} profiles in {store.path or ':memory:'}")
        if profiles:
            keys = [p.key for p in profiles] if args.wide else cut_keys([p.key for p in profiles])
            cells = [[key, p.runs, fmt_seconds(p.runtime), fmt_bytes(p.footprint), p.origin]
                     for key, p in zip(keys, profiles)]
            for line in format_table(["key", "runs", "run time", "footprint", "origin"], cells, right=[1, 2, 3]):
                print(line)
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    with existing_store(args) as store:
        key, profile = args.key, store.get(args.key)
        if profile is None:
            keys = [p.key for p in store.profiles()]
            listed = [stored for stored, shown in zip(keys, cut_keys(keys)) if shown == args.key]
            if len(listed) == 1:  # as `list` prints it, cut: one key
                key, profile = listed[0], store.get(listed[0])
        if profile is None:
            near = near_keys(args.key, keys)
            also = (f"; did you mean {' or '.join(shlex.quote(key) for key in near)}?" if near else "")
            raise ValueError(f"no profile with key {args.key!r} in {store.path}{also} "
                             f"(`scalpel profile list --wide` shows the keys)")
        learned = _learned_tail(store, key)
        speedup = store.speedup(key)
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
        family = store.family_speedup(family_of(key)) if speedup is None and "(" in key else None
        if speedup is None:
            print(f"{'speed-up':>15}: none learned (no malleable run of this key at more cores than its narrowest)"
                  + ("" if family is None else
                     f"; a malleable task of it starts from its app's keys': serial fraction {family.serial_fraction:.3f}"
                     f" over {family.readings} reading{'s' if family.readings != 1 else ''}"))
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
    if name == "footprint" and value == 0:
        return f"{fmt_bytes(value)} (none held: its tasks ended before the probe's first window, or touched no memory in it)"
    if name.startswith("footprint") and name != "footprint_runs" or name == "peak_rss":
        return fmt_bytes(value)
    if name.startswith("runtime"):
        return fmt_seconds(value)
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
    with existing_store(args) as store:
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
    with writing_store(args, "import profiles") as store:
        count = store.import_document(document, prefix=args.prefix)
        where = store.path
    print(f"imported {count} profiles into {where}" + (f" under {args.prefix!r}" if args.prefix else ""))
    return 0


def cmd_clear(args: argparse.Namespace) -> int:
    if not (args.all or args.prefix or args.key):
        raise ValueError("say what to clear: a KEY, --prefix PREFIX, or --all")
    with writing_store(args, "clear profiles") as store:
        delete = store.delete_speedups if args.speedup else store.delete
        if args.key:
            removed = delete(args.key, exact=True)
        else:
            removed = delete("" if args.all else args.prefix)
    print(f"removed the speed-up readings of {removed} key{'s' if removed != 1 else ''}, their profiles kept"
          if args.speedup
          else f"removed {removed} profiles")
    return 0


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
    action("show", cmd_show, "every statistic of one profile").add_argument(
        "key", help="the profile key, whole (`list --wide`) or as `list` cuts it where that names one")
    export = action("export", cmd_export, "write profiles as a scalpel-profile/1 JSON document")
    export.add_argument("--prefix", default="", help="only keys starting with this")
    export.add_argument("-o", "--output", help="file to write (default: standard output)")
    export.add_argument("--name", default="profile-store", help="the document's name")
    importer = action("import", cmd_import, "load a scalpel-profile/1 document, or a shipped profile by name")
    importer.add_argument("source", help="a JSON file, or a shipped profile name such as polybench-xeon-e5620")
    importer.add_argument("--prefix", default="", help="prepended to every imported key, e.g. polybench/")
    clear = action("clear", cmd_clear, "remove profiles")
    clear.add_argument("key", nargs="?", help="remove exactly this key, whole as `list --wide` shows it")
    clear.add_argument("--prefix", default="", help="remove every key starting with this")
    clear.add_argument("--all", action="store_true", help="remove every profile")
    clear.add_argument("--speedup", action="store_true",
                       help="remove only the speed-up readings of those keys (what `show` says as their serial "
                            "fraction), keeping their run times and footprints: their next malleable run "
                            "explores wider widths again")
    run = action("run", cmd_run, "run an app once (or --repeat N times) on sample inputs and store its measured profile")
    run.add_argument("target", help="MODULE:FUNCTION (the module is imported from the current directory or sys.path) "
                                    "or FILE.py:FUNCTION (a script, imported from its folder); "
                                    "a notebook's app: scalpel_executor.measure_app(app, ARGS, ...) in the notebook")
    run.add_argument("args", nargs="*", help="positional arguments, as Python literals where they parse (2000, 'x', [1, 2])")
    run.add_argument("--kw", action="append", default=[], metavar="NAME=VALUE", help="a keyword argument (repeatable)")
    run.add_argument("--repeat", type=at_least(1), default=1, help="runs to measure (default %(default)s)")
    run.add_argument("--key", help="store under this key instead of the computed one")
    run.add_argument("--widths", type=widths_list, metavar="N,N[,...]",
                     help="also measure its speed-up: run it on each of these core counts of one cache domain "
                          "(e.g. 1,2; its thread pools sized to them), interleaved, --repeat times, and store the "
                          "serial fraction each wider run reads, which an app marked malleable (max_cores) starts "
                          "from; for nodes where a run would not try it wider")
