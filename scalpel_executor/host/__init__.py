"""Reads this machine: its LLC domains (sysfs) and what a task touches (the footprint probe)."""
