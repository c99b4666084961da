"""What runs in the driver's process, the user's Python: the Parsl executor and everything it keeps.

The executor (:mod:`.executor`, :mod:`.provider_mode`), what it learns and tells its tasks
(:mod:`.host_learning`, :mod:`.path_learning`, :mod:`.graph`), its run report (:mod:`.report`,
:mod:`.model_point`), its view of the node managers (:mod:`.ledger`, :mod:`.monitoring`), the client
of a local node manager (:mod:`.manager_client`, :mod:`.manager_process`) and provider mode's hub
and placement (:mod:`.hub`, :mod:`.placement`). It may import the node side
(:mod:`scalpel_executor.runtime.node`): with ``node_manager=False`` the pool runs in this process.
"""
