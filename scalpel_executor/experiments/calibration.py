"""Former name of :mod:`scalpel_executor.experiments.contention_fit`, kept while
benchmarks/policy_study.py imports ``load_model`` from here."""

from scalpel_executor.experiments.contention_fit import load_model

__all__ = ["load_model"]
