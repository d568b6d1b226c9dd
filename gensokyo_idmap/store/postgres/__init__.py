"""The PostgreSQL backend of the identity graph (``idmap.backend: postgres``): several
daemons share one graph.

- :mod:`.connect`, :mod:`.connection`, :mod:`.ping`: connections, pools, failing clearly;
- :mod:`.migrate` and :mod:`.schema`: the schema as ordered, checksummed migrations;
- :mod:`.identity`, :mod:`.view`, :mod:`.writes`: the graph
  (:class:`~..base.IdentityStore`): reads, held-back writes, group commit;
- :mod:`.copy`: the whole graph in and out, for ``store copy`` and ``backup``;
- :mod:`.gateway_session`: the gateway's session and seq per shard, for every daemon.
"""
