"""Workflows shaped like real ones: WfCommons' WfChef recipes as DAGs of simulated tasks.

WfCommons (the optional ``workflows`` extra) ships WfChef recipes built from execution traces of
real workflows: each recipe knows the trace graphs (which task types feed which) and, per task
type, a fitted run-time distribution. :func:`workflow` generates an instance of a recipe at a
given size and seed and turns it into :class:`~scalpel_executor.core.simulate.SimTask` objects
whose ``parents`` are the instance's dependencies, so the simulator releases each task when its
inputs exist, as Parsl does::

    SHAPES["montage"] ── wfcommons MontageRecipe(num_tasks, BIGGEST trace ≤ size) ── Workflow (a DiGraph)
        seeded: Python's and numpy's global generators (WfChef draws from both), restored after
        └─> [SimTask(task id, run time from the trace's distribution, FOOTPRINTS[type], parents), ...]

**Sizes.** Each shape's ``typical`` size is the size of one of its recipe's real traces (named in
``trace``), and the instance is generated from the largest trace graph that fits the size asked
(WfChef's ``BaseMethod.BIGGEST``), so at the typical size the DAG is that trace's graph, with run
times drawn anew per seed; larger sizes replicate its microstructures. ``minimum`` is the smallest
trace graph a recipe has: it cannot generate fewer tasks. (WfChef's default method instead starts
from the trace most similar to the one nearest in size, never that trace itself, which turns a
474-node Montage request into seven small mosaics side by side.)

**Footprints are an assumption.** The recipes carry run times and file sizes, not memory, so each
task type's LLC footprint (the working set a task cycles through, what the contention model reads)
is set below, from what the tool does. Montage's come from its real traces (mProject ~15 MB,
mDiffFit ~3 MB, mBgModel ~137 MB). For the others the rule is: a tool that streams records
(format conversion, filters, concatenation) keeps a few MiB of buffers; one that probes an index
or a reference at random (read mapping, variant calling, set intersections in Python) cycles
through far more than any LLC here, 64-256 MiB; merges and sorts sit between. Epigenomics, SoyKB
and 1000Genome are memory-heavy by this rule, Montage, Cycles, Seismology and BLAST mostly light.
``docs/results/workflows.md`` repeats the table.

This module imports WfCommons only inside :func:`workflow` (the core never does), and generation
is offline: WfChef reads its recipes from the installed package (about 0.1 s per 400-task
instance; the first import about 1 s); only WfCommons' instance *validation*, not used here,
fetches a schema over the network.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass

from scalpel_executor.core.simulate import SimTask
from scalpel_executor.core.units import parse_size

__all__ = ["SHAPES", "STUDY_SHAPES", "Shape", "WorkflowsUnavailable", "workflow", "task_type"]

# scalpel-executor is not on the package index: its "workflows" extra installs from a checkout.
INSTALL_HINT = 'python3 -m pip install -e ".[workflows]" in a scalpel-executor checkout (or pip install wfcommons)'


class WorkflowsUnavailable(ImportError):
    """WfCommons cannot be imported; the message says what to install."""


@dataclass(frozen=True)
class Shape:
    """A WfChef recipe, the sizes it generates and the footprint assumed per task type."""

    name: str
    recipe: str  # class name in wfcommons.wfchef.recipes
    minimum: int  # tasks of the recipe's smallest trace graph: no instance is smaller
    typical: int  # tasks of the trace named below: the size the workflow study uses
    trace: str
    footprints: Mapping[str, str]  # task type -> LLC footprint (a size such as "15MiB")


SHAPES: dict[str, Shape] = {shape.name: shape for shape in (
    # Montage (astronomy mosaics): sizes measured in its traces, per tile or per mosaic.
    Shape("montage", "MontageRecipe", 58, 472, "montage-chameleon-dss-10d-001 (a 1-degree DSS mosaic, 3 bands)", {
        "mProject": "15MiB",  # one tile in, its reprojection out
        "mDiffFit": "3MiB",  # the overlap strip of two reprojected tiles
        "mConcatFit": "1MiB",  # a table of plane fits
        "mBgModel": "137MiB",  # every tile's fit and overlaps, solved iteratively in memory
        "mBackground": "15MiB",  # one reprojected tile, corrected
        "mImgtbl": "1MiB",  # FITS headers only
        "mAdd": "32MiB",  # co-adds line by line: a row buffer per input tile, not the whole mosaic
        "mViewer": "32MiB",  # histogram and stretch of the mosaic, read in passes
    }),
    # Epigenomics (maq read mapping of one chromosome): streaming read converters, then mapping.
    Shape("epigenomics", "EpigenomicsRecipe", 41, 421, "epigenomics-chameleon-hep-5seq-100k-001", {
        "fastqSplit": "2MiB", "filterContams": "2MiB", "sol2sanger": "2MiB", "fast2bfq": "2MiB",  # streaming
        "map": "192MiB",  # random probes into chr21's packed reference and the reads' hash index
        "mapMerge": "16MiB",  # a block per sorted input
        "chr21": "64MiB",  # sorts and indexes one chromosome's merged alignments
        "pileup": "96MiB",  # per-position counts over the alignments and the reference
    }),
    # 1000Genome (Python over VCF slices): per-individual mutation sets, intersected at random.
    Shape("1000genome", "GenomeRecipe", 52, 416, "1000genome-chameleon-16ch-100k-001", {
        "individuals": "128MiB",  # a VCF slice parsed into per-individual dicts, scanned repeatedly
        "individuals_merge": "48MiB",  # merges the slices' per-individual files
        "sifting": "8MiB",  # a grep-like scan of the SIFT annotation
        "mutation_overlap": "96MiB",  # Python sets per individual, intersected pairwise
        "frequency": "96MiB",  # the same sets, sampled at random, counted per mutation
    }),
    # SoyKB (BWA, Picard and GATK 3 on a 1 Gbp genome): index walks and per-locus state.
    Shape("soykb", "SoykbRecipe", 96, 416, "soykb-chameleon-30fastq-20ch-001", {
        "alignment_to_reference": "256MiB",  # FM-index walks over a ~1.5 GB index: the hot part
        "sort_sam": "64MiB",  # an in-memory record buffer, sorted and spilled
        "dedup": "96MiB",  # MarkDuplicates' read-end hash maps
        "add_replace": "8MiB",  # rewrites read groups record by record
        "realign_target_creator": "128MiB", "indel_realign": "128MiB",  # reads against the reference, per locus
        "haplotype_caller": "192MiB",  # local assembly and pair-HMM per active region
        "merge_gcvf": "64MiB",  # a block per input gVCF
        "genotype_gvcfs": "128MiB",  # joint genotyping across samples per site
        "combine_variants": "32MiB", "select_variants_snp": "32MiB", "select_variants_indel": "32MiB",
        "filtering_snp": "16MiB", "filtering_indel": "16MiB",  # streaming VCF filters
    }),
    # Cycles (crop model per site and scenario, C): small state, then Python summaries and plots.
    Shape("cycles", "CyclesRecipe", 67, 438, "cycles-chameleon-1l-2c-12p-001", {
        "baseline_cycles": "8MiB", "cycles": "8MiB", "fertilizer_increase_cycles": "8MiB",  # soil layers, a year of weather
        "cycles_fertilizer_increase_output_parser": "2MiB", "cycles_output_summary": "2MiB",
        "cycles_fertilizer_increase_output_summary": "2MiB",  # small CSV tables
        "cycles_plots": "48MiB",  # pandas and matplotlib over every site's output
    }),
    # Seismology (deconvolution of station waveforms): FFTs of a few thousand samples.
    Shape("seismology", "SeismologyRecipe", 101, 401, "seismology-chameleon-400p-001", {
        "sG1IterDecon": "2MiB", "wrapper_siftSTFByMisfit": "8MiB",
    }),
    # BLAST (query chunks against a database): the database's lookup structures dominate.
    Shape("blast", "BlastRecipe", 43, 303, "blast-chameleon-medium-001", {
        "split_fasta": "2MiB", "blastall": "64MiB", "cat_blast": "2MiB", "cat": "1MiB",
    }),
)}

#: The shapes ``benchmarks/workflow_study.py`` runs by default: one light, three memory-heavy.
STUDY_SHAPES = ("montage", "epigenomics", "1000genome", "soykb")


def task_type(task: SimTask) -> str:
    """The WfChef task type of a task :func:`workflow` made (its id is ``<type>_<number>``)."""
    return task.name.rsplit("_", 1)[0]


def workflow(shape: str, tasks: int | None = None, seed: int = 0) -> list[SimTask]:
    """An instance of WfChef recipe ``shape`` as simulated tasks with parents.

    Parameters
    ----------
    shape : str
        A name of :data:`SHAPES`.
    tasks : int, optional
        At most this many tasks (default: the shape's ``typical`` size; at least its ``minimum``).
    seed : int
        Seeds the run times (and, above a trace's size, which microstructures are replicated).

    Returns
    -------
    list of SimTask
        Named by WfChef's task ids (``mProject_00000001``; :func:`task_type` reads the type back),
        solo times from the recipe's run-time distributions (seconds, as traced), footprints from
        the shape's table, ``parents`` as indices into the list.
    """
    if shape not in SHAPES:
        raise ValueError(f"unknown workflow shape {shape!r}; choose from {', '.join(SHAPES)}")
    spec = SHAPES[shape]
    size = spec.typical if tasks is None else tasks
    if isinstance(size, bool) or not isinstance(size, int) or size < spec.minimum:
        raise ValueError(f"the {shape} recipe generates at least {spec.minimum} tasks (its smallest trace), "
                         f"got tasks={size!r}; ask for {spec.minimum} or more (typical: {spec.typical})")
    generated = _generate(spec.recipe, size, seed)
    index = {task_id: i for i, task_id in enumerate(generated.tasks)}
    out = []
    for task_id, task in generated.tasks.items():
        if task.name not in spec.footprints:
            raise ValueError(f"the {shape} recipe made a task of type {task.name!r}, which SHAPES[{shape!r}] gives "
                             f"no footprint; add it to the table in {__name__}")
        out.append(SimTask(task_id, float(task.runtime), float(parse_size(spec.footprints[task.name])),
                           parents=tuple(sorted(index[p] for p in generated.predecessors(task_id)))))
    return out


def _generate(recipe: str, tasks: int, seed: int):
    """WfChef's instance of ``recipe`` with at most ``tasks`` tasks, seeded; the callers' random
    state is left as it was."""
    try:
        import numpy  # WfChef's run times come from scipy.stats, which draws from numpy's global generator
        from wfcommons import WorkflowGenerator  # optional: only the workflow experiments need it
        from wfcommons.wfchef import recipes
        from wfcommons.wfchef.wfchef_abstract_recipe import BaseMethod
    except ImportError as error:
        raise WorkflowsUnavailable(f"workflow shapes need WfCommons ({error}): {INSTALL_HINT}") from None
    saved = random.getstate(), numpy.random.get_state()
    random.seed(seed)
    numpy.random.seed(seed)
    try:
        # WfChef counts a virtual source and sink among its nodes. exclude_graphs=() and not a set:
        # with BIGGEST, WfCommons 1.6 tests each trace's summary (a dict) for membership in it,
        # which a set refuses (unhashable) and a tuple answers.
        cls = getattr(recipes, recipe)
        return WorkflowGenerator(cls(num_tasks=tasks + 2, base_method=BaseMethod.BIGGEST,
                                     exclude_graphs=())).build_workflow()
    finally:
        random.setstate(saved[0])
        numpy.random.set_state(saved[1])
