"""What crosses between the processes: the messages and the channels that carry them.

:mod:`.manager_messages` between the driver and a node manager, :mod:`.worker_messages` between
the pool and a worker, :mod:`.channel` provider mode's CurveZMQ sockets, :mod:`.outbox` many
messages to a frame. It imports none of the process packages.
"""
