"""The clauses of a run's closing sentence that read the report's rows alone
(:func:`~scalpel_executor.runtime.driver.report.run_summary` joins them, :func:`sentence`): where the
estimates came from, what the run taught, and the widths its malleable tasks started on."""

from __future__ import annotations

import math
import shlex
from collections import Counter
from collections.abc import Mapping

from scalpel_executor.core.widths import EXPLORE_COST, NO_SPEEDUP
from scalpel_executor.learning.migrate import app_of, arguments_of, family_of, number_part
from scalpel_executor.learning.host_model import SOLO_SOURCE
from scalpel_executor.learning.keys import SMALL

#: How the closing sentence names each estimate source (learning.estimates.SOURCES), in that order.
SOURCE_WORDS = {"hint": "from hints", "learned": "learned in this run", "store": "from the profile store",
                "shape": "from the call's shape key", "app": "from the app's other calls", "prior": "guessed",
                SOLO_SOURCE: "from the per-key interference fit's solo times"}


#: The advice's placeholders, and what each stands for (``scalpel profile run`` refuses one pasted as is).
PLACEHOLDERS = {"MODULE:FUNCTION": "the app's module and function, e.g. mylab.kernels:smooth",
                "ARGS": "the arguments of one of the workflow's calls of the app, e.g. 2000 0.5",
                "KEY": "a profile key (`scalpel profile list --wide` names them)"}
TARGET, ARGS, KEY = PLACEHOLDERS

#: Said where no malleable task was tried wider (``no speed-up learned`` every one): why, by what
#: the rows say of their run times, and how to measure the speed-up, naming the key where one is.
WIDTHS_ADVICE = ", {who} wider ({why}): `scalpel profile run {target} %s --widths 1,2 --key {key}{store}` " \
                "measures {whose} beforehand" % ARGS
#: ... for an app of a ``__main__`` no file holds (a notebook's, a REPL's): the call from Python.
WIDTHS_ADVICE_IN_PYTHON = ", {who} wider ({why}): `scalpel_executor.measure_app({function}, %s, widths=(1, 2){store})` " \
                          "where {function} is defined measures {whose} beforehand" % ARGS
#: ... said too where other keys were tried wider, for keys never tried that held at least this
#: share of the malleable tasks' seconds: a key whose tasks all run while many wait is never tried
#: wider, run after run (Montage's reprojections on the paper's 8 cores, 73% of the work,
#: docs/results/widths.md), where a key of three short tasks is not worth a line.
NEVER_TRIED_SHARE = 0.1
#: Why none was tried wider: every run time a guess (a wider run would read nothing), none, or some;
#: ``{its}`` names the key or keys.
WIDTHS_WHY = {"guessed": "{its} a guess",
              "dear": f"a try that did not speed up would have ended the work more than {EXPLORE_COST:.0%} later"}
WIDTHS_WHY["both"] = f"{WIDTHS_WHY['guessed']}, or {WIDTHS_WHY['dear']}"


def profile_target(key: str, script: str | None = None) -> str:
    """What ``scalpel profile run`` imports to measure ``key``'s app: ``MODULE:FUNCTION`` of the
    key's app, the script's module or file for an app of ``__main__`` (``script``: the report's,
    :func:`~scalpel_executor.runtime.driver.report.script_module`); the placeholder where neither
    tells it (a key a user named, a bash app, a notebook's function, a nested one).

    >>> profile_target("lab.kernels.smooth(n<16)"), profile_target("__main__.fit(n<16)", "fit")
    ('lab.kernels:smooth', 'fit:fit')
    >>> profile_target("__main__.fit(n<16)", "runs/fit.py"), profile_target("__main__.fit(n<16)", "my runs/fit.py")
    ('runs/fit.py:fit', "'my runs/fit.py:fit'")
    >>> profile_target("__main__.fit(n<16)"), profile_target("wf.shell[blastall](str)"), profile_target("mine")
    ('MODULE:FUNCTION', 'MODULE:FUNCTION', 'MODULE:FUNCTION')
    >>> profile_target("lab.Fitter.run(n<16)"), profile_target("__main__.Fitter.run(n<16)", "fit")
    ('MODULE:FUNCTION', 'MODULE:FUNCTION')
    """
    app = app_of(key)
    if app is None or app != family_of(key) or "<" in app or "." not in app:
        return TARGET
    module, _, function = app.rpartition(".")
    if module == "__main__" and script and script.endswith(".py"):
        return shlex.quote(f"{script}:{function}")
    if module == "__main__":
        module = script or ""
    # a part that is not an identifier, or capitalised as a class is (a method's app), imports no module
    parts = module.split(".")
    return f"{module}:{function}" if all(part.isidentifier() and not part[0].isupper() for part in parts) \
        else TARGET


def widths_advice(rows: list[Mapping], who: str = "none tried", script: str | None = None,
                  store: str | None = None) -> str:
    """:data:`WIDTHS_ADVICE` for the malleable ``rows`` of a run that tried none wider (``who``
    names them where other rows were tried); ``script`` as :func:`profile_target` takes it;
    ``store``: the profile store the run read, which the measurement must reach (:func:`_store`).
    Of several keys, the command is that of the key of the most seconds, which a user can paste
    once ARGS is filled in, and the others are named after it (:func:`named_keys`).

    >>> widths_advice([{"profile_key": "m.smooth(n<16)", "runtime_source": "store"}] * 2)
    ", none tried wider (a try that did not speed up would have ended the work more than 2% later): \
`scalpel profile run m:smooth ARGS --widths 1,2 --key 'm.smooth(n<16)'` measures its speed-up beforehand"
    >>> widths_advice([{"profile_key": "m.smooth(n<16)", "measured_runtime": 9.0},
    ...                {"profile_key": "m.fit(n<16)", "measured_runtime": 1.0}]).split(": ", 1)[1]
    "`scalpel profile run m:smooth ARGS --widths 1,2 --key 'm.smooth(n<16)'` measures the speed-up of the key \
of the most seconds beforehand, and likewise of 'm.fit(n<16)'"
    """
    guessed = [row.get("runtime_source") == "prior" for row in rows]
    why = WIDTHS_WHY["guessed" if all(guessed) else "both" if any(guessed) else "dear"]
    keys = by_seconds(rows)
    why = why.format(its="its run time" if len(keys) == 1 else "their run times")
    on_the_command_line = f" --store {shlex.quote(store)}" if store else ""
    if not keys:
        return WIDTHS_ADVICE.format(who=who, why=why, target=TARGET, key=KEY, whose="a key's speed-up",
                                    store=on_the_command_line)
    key = keys[0]
    whose, likewise = ("its speed-up", "") if len(keys) == 1 else \
        ("the speed-up of the key of the most seconds", f", and likewise of {named_keys(keys[1:])}")
    app = app_of(key) or ""
    function = app.removeprefix("__main__.")
    if script is None and app.startswith("__main__.") and function.isidentifier():
        advice = WIDTHS_ADVICE_IN_PYTHON.format(who=who, why=why, function=function, whose=whose,
                                                store=f", store={store!r}" if store else "")
    else:
        advice = WIDTHS_ADVICE.format(who=who, why=why, target=profile_target(key, script), key=shlex.quote(key),
                                      whose=whose, store=on_the_command_line)
    return advice + likewise


#: A closing sentence longer than this many characters is said a clause per line, each after the
#: first indented: a run with malleable tasks and advice ran past 1,000 characters on one line.
SUMMARY_WIDTH = 400


def sentence(parts: list[str]) -> str:
    """The closing sentence's clauses joined: on one line, or past :data:`SUMMARY_WIDTH`
    characters a clause per line.

    >>> sentence(["scalpel: 1 task", "no co-runs over the LLC"])
    'scalpel: 1 task; no co-runs over the LLC'
    >>> print(sentence(["scalpel: 1 task", "x" * SUMMARY_WIDTH]).replace("x" * SUMMARY_WIDTH, "..."))
    scalpel: 1 task;
      ...
    """
    joined = "; ".join(parts)
    return joined if len(joined) <= SUMMARY_WIDTH else ";\n  ".join(parts)


#: The keys the advice names at most, those of the most seconds first; the rest are counted.
NAMED_KEYS = 3


def named_keys(keys: list[str]) -> str:
    """``keys`` (as :func:`by_seconds` orders them), at most :data:`NAMED_KEYS` named (each as
    ``--key`` takes it) and the rest counted.

    >>> rows = [{"profile_key": f"m.{name}(n<16)", "measured_runtime": t} for name, t in
    ...         (("a", 1.0), ("b", 5.0), ("a", 1.0), ("c", 3.0), ("d", 0.5))]
    >>> named_keys(by_seconds(rows))
    "'m.b(n<16)', 'm.c(n<16)', 'm.a(n<16)' and 1 more"
    >>> named_keys(by_seconds(rows)[1:])
    "'m.c(n<16)', 'm.a(n<16)', 'm.d(n<16)'"
    """
    more = f" and {len(keys) - NAMED_KEYS} more" if len(keys) > NAMED_KEYS else ""
    return ", ".join(shlex.quote(key) for key in keys[:NAMED_KEYS]) + more


def by_seconds(rows: list[Mapping]) -> list[str]:
    """The profile keys of ``rows``, those whose rows ran the most seconds first."""
    seconds: Counter[str] = Counter()
    for row in rows:
        if row.get("profile_key"):
            seconds[row["profile_key"]] += _seconds(row)
    return [key for key, _ in seconds.most_common()]


def _store(report: Mapping) -> str | None:
    """The path of the profile store a run read and kept, which a measurement beforehand must be
    stored in to reach its next run; None where it kept none (``profiles=False``, in memory)."""
    store = report.get("profile_store") or {}
    path = store.get("path")
    return path if path and path != ":memory:" and store.get("persistent") else None


def width_words(report: Mapping) -> str | None:
    """The widths the run's malleable tasks started on, how many at each and why
    (:data:`~scalpel_executor.core.widths.REASONS`); None where no task was malleable. Where every
    one started narrow for want of a learned speed-up, this says why none was tried wider and how
    to measure one (:func:`widths_advice`): on a small node with a batch waiting, a try at no gain
    costs more than the run allows, and no run ever learns the speed-up.

    >>> rows = [{"width": 1, "width_reason": "no speed-up learned"}] * 3 + [{"width": 2, "width_reason": "tail"},
    ...         {"width": 1, "width_reason": "many waiting"}, {"width": None}]
    >>> width_words({"tasks": rows})
    'widths of 5 malleable tasks: 4 at 1 core (no speed-up learned 3, many waiting 1), 1 at 2 cores (tail)'
    >>> width_words({"tasks": rows[:3]}).endswith(widths_advice(rows[:3]))
    True
    """
    by_width: dict[int, Counter[str]] = {}
    malleable = [row for row in report["tasks"] if row.get("width") is not None]
    for row in malleable:
        by_width.setdefault(row["width"], Counter())[row.get("width_reason") or "reason not recorded"] += 1
    if not by_width:
        return None
    groups = []
    for width, reasons in sorted(by_width.items()):
        why = ", ".join(reason if len(reasons) == 1 else f"{reason} {count}" for reason, count in reasons.most_common())
        groups.append(f"{sum(reasons.values())} at {width} core{'s' if width != 1 else ''} ({why})")
    words = f"widths of {len(malleable)} malleable task{'s' if len(malleable) != 1 else ''}: {', '.join(groups)}"
    if all(set(reasons) == {NO_SPEEDUP} for reasons in by_width.values()):
        return words + widths_advice(malleable, script=report.get("script"), store=_store(report))
    by_key: dict[str, list[Mapping]] = {}
    for row in malleable:
        if row.get("profile_key"):
            by_key.setdefault(row["profile_key"], []).append(row)
    total = sum(_seconds(row) for row in malleable)
    never = [rows for rows in by_key.values() if all(r.get("width_reason") == NO_SPEEDUP for r in rows)
             and sum(map(_seconds, rows)) >= NEVER_TRIED_SHARE * total > 0]
    if never:
        keys, never = len(never), [row for rows in never for row in rows]
        share = sum(map(_seconds, never)) / total
        words += widths_advice(never, f"{len(never)} task{'s' if len(never) != 1 else ''} of "
                                      f"{'a key' if keys == 1 else f'{keys} keys'} ({share:.0%} of the malleable "
                                      f"tasks' seconds) not tried", report.get("script"), _store(report))
    return words


#: A small integer (``n<16``, 0 to 15) counts as this value where a number's spread is taken.
SMALL_VALUE = 8.0


def split_words(report: Mapping) -> str | None:
    """The apps whose calls went under two or more profile keys that differ in one argument alone,
    a number, whose run times spread less than the square root of its values' spread (each key's
    least run time, as a worker's first call of an app also imports its modules): a seed, an index
    or a run number bucketed like a size (from 16 on), which splits what the profile store learns
    into keys, so a run of new values starts from guesses again. A size changes the work: its run
    times spread at least as its values do. Named with the hint that keeps them as one key; None
    where no app's were so. A key a user named, or one told apart by more than one argument, is not.

    >>> rows = [{"ok": True, "profile_key": f"m.plot({key})", "measured_runtime": 0.2}
    ...         for key in ("n<16", "~16", "~19", "~22.6")]
    >>> split_words({"tasks": rows})
    "plot's calls went under 4 profile keys told apart by its argument 1 alone (n<16 to ~22.6), their run \
times alike (0.2 s to 0.2 s): if it is a seed or an index, not a size, name it in \
`@app_hints(size_free=(...))` to keep them under one (docs/profiles.md)"
    """
    runs: dict[str, list[float]] = {}
    for row in report["tasks"]:
        key = row.get("profile_key")
        if row.get("ok") and key and app_of(key) is not None and _seconds(row) > 0:
            runs.setdefault(key, []).append(_seconds(row))
    families: dict[str, dict[str, list[str]]] = {}
    for key in runs:
        if (arguments := arguments_of(key)) is not None:
            families.setdefault(family_of(key), {})[key] = arguments
    said = []
    for family, keys in families.items():
        if len(keys) < 2 or len({len(arguments) for arguments in keys.values()}) != 1:
            continue
        lists = list(keys.values())
        differ = [i for i in range(len(lists[0])) if len({arguments[i] for arguments in lists}) > 1]
        if len(differ) != 1 or not all(number_part(arguments[differ[0]]) for arguments in lists):
            continue
        position = differ[0]
        values = sorted((arguments[position] for arguments in lists), key=_number)
        least = sorted(min(runs[key]) for key in keys)
        low, high = abs(_number(values[0])), abs(_number(values[-1]))
        if not (0 < low < high and least[-1] / least[0] < math.sqrt(high / low)):
            continue
        name, equals, _ = lists[0][position].partition("=")
        which = f"{name}=" if equals else f"its argument {position + 1}"
        hint = f'`@app_hints(size_free=("{name}",))` keeps' if equals else \
            "name it in `@app_hints(size_free=(...))` to keep"
        said.append(f"{family.rpartition('.')[2]}'s calls went under {len(keys)} profile keys told apart by {which} "
                    f"alone ({values[0].rpartition('=')[2]} to {values[-1].rpartition('=')[2]}), their run times alike ({least[0]:.3g} s to "
                    f"{least[-1]:.3g} s): if it is a seed or an index, not a size, {hint} them under one "
                    f"(docs/profiles.md)")
    return "; ".join(said) or None


def _number(part: str) -> float:
    """A number part of a key (:func:`~scalpel_executor.learning.migrate.number_part`) as a value:
    a small integer (``n<16``) as :data:`SMALL_VALUE`."""
    value = part.rpartition("=")[2]
    return SMALL_VALUE if value == SMALL else float(value.replace("~", ""))


def _seconds(row: Mapping) -> float:
    """A row's measured run time, 0 where none was measured."""
    seconds = row.get("measured_runtime")
    return seconds if isinstance(seconds, (int, float)) and seconds > 0 else 0.0


def learned_words(report: Mapping) -> str:
    """What the run taught: the keys whose run times it measured (how many new to the store), the
    footprints the probe read, whether any of it is kept (the profile store's section), and the
    apps whose calls it kept apart by a number that may be no size (:func:`split_words`)."""
    timed, new, measured = set(), set(), set()
    for row in report["tasks"]:
        if row.get("ok") and row.get("profile_key") and row.get("measured_runtime") is not None:
            timed.add(row["profile_key"])
            if row.get("runtime_source") == "prior":
                new.add(row["profile_key"])
            if row.get("measured_footprint"):
                measured.add(row["profile_key"])
    store = report.get("profile_store")
    if not timed:
        return "learned nothing (no task finished)"
    learned = (f"learned the run times of {len(timed)} key{'s' if len(timed) != 1 else ''}, {len(new)} of them new, "
               f"and the footprints of {len(measured)}")
    if store is None:
        learned += ", kept for this run only (profiles=False)"
    elif not store.get("persistent"):
        learned += f", kept for this run only ({store.get('problem') or 'an in-memory store'})"
    else:
        learned += ", kept in the profile store"
    split = split_words(report)
    return learned if split is None else f"{learned}; {split}"


def source_words(sources: Mapping) -> str:
    def words(counts: Mapping) -> str:
        named = [f"{counts[source]} {SOURCE_WORDS.get(source, source)}" for source in
                 [*SOURCE_WORDS, *sorted(set(counts) - set(SOURCE_WORDS))] if counts.get(source)]
        return ", ".join(named) or "none"
    footprint, runtime = sources["footprint"], sources["runtime"]
    if footprint == runtime:
        return f"estimates: {words(footprint)}"
    return f"footprints: {words(footprint)}; run times: {words(runtime)}"
