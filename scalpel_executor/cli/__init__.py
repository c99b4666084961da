"""The ``scalpel`` command: one module per command, each with its parser beside its handler."""

from scalpel_executor.cli.app import main

__all__ = ["main"]
