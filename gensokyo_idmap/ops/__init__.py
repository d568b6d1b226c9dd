"""Operations: what an operator runs beside the daemon (verify, backup, recover, config tools).

``verify`` and ``gensokyo_config`` are pure (data in, findings out); ``lmdb_files`` and
``recover`` touch files.
"""
