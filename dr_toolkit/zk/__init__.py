"""ZooKeeper access: the client factory (:mod:`dr_toolkit.zk.client`) and recipes (fencing).

Nothing here imports kazoo at module level; :func:`dr_toolkit.zk.client.connect` does it.
"""
