"""The ``scalpel`` entry point under its former import path; the command lives in :mod:`scalpel_executor.cli`.

Kept only while tests/learning/test_profiles.py imports ``scalpel_executor.cli.app.main``.
"""

from scalpel_executor.cli import main

__all__ = ["main"]
