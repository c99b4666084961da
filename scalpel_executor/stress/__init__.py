"""Stress and fault harnesses: they drive real executors, node managers and hubs through crashes,
stalls, hostile peers, long soaks and dispatch at capacity, and check that every task ends once.

- :mod:`.faults` — faults at workers; :mod:`.manager_faults` — faults at node managers, with the
  peers its cases play in :mod:`.manager_peers`; :mod:`.soak` — crashes over many tasks and
  start/stop cycles; :mod:`.dispatch_capacity` — tasks/s through one hub with fake managers.

The tests under tests/runtime/ and the reliability benchmarks (benchmarks/faults.py, ...) run them.
Not a user API: no command of ``scalpel`` and no other module of the package imports this package.
"""
