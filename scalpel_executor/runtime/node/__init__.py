"""What runs on a node, in its node manager's process (or in the driver's with ``node_manager=False``).

The node manager (:mod:`.manager`, ``scalpel-manager``), its worker pool with the dispatch thread
that drives the core scheduler (:mod:`.pool`), how worker processes start and end
(:mod:`.processes`) and whether a task fits the node (:mod:`.fit`). Nothing here imports the
driver's package.
"""
