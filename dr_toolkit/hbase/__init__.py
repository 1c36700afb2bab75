"""HBase replication set-up and status (capability 1.3), straight on HBase's ZooKeeper layout.

- :mod:`dr_toolkit.hbase.encoding` — znode paths and value encodings (``PBUF`` protobuf, legacy strings)
- :mod:`dr_toolkit.hbase.peers` — add/remove/enable/disable/list peers, idempotent, with dry-run
- :mod:`dr_toolkit.hbase.tables` — ``REPLICATION_SCOPE`` sweep through ``hbase shell -n``
- :mod:`dr_toolkit.hbase.status` — queue status from ZooKeeper, ``status 'replication'`` parser
"""
