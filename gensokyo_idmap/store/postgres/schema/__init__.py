"""The PostgreSQL schema of the identity graph, as ordered migrations.

``NNNN_<name>.sql``, applied in version order, each once, each recorded in
``schema_migrations`` with the SHA-256 of its text (:mod:`gensokyo_idmap.store.postgres.migrate`).
A file is never edited once released: a change is a new file with the next number.
"""
