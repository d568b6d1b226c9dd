"""The daemon's disposable runtime state: message ids, delivery claims, passive-reply
budgets. Losing any of it loses reply context or de-duplication memory, never an identity
(docs/stores.md).

One set of rules, two backends. The rules and interfaces are the modules at this level:

- :mod:`.msgid`: virtual message ids (``MessageIds``; ``MsgIdMap`` over a ``MsgIdStore``),
  their TTL and sweep, contexts, quotes;
- :mod:`.blocks`: the high-water mark of id positions, reserved in the precious store, so
  a lost runtime store never hands an id out twice;
- :mod:`.claims`: delivery claims (de-duplication), in memory and in a ``ClaimStore``;
- :mod:`.replies`: passive-reply budgets: the platform's reply windows and limits, and the
  counts that keep each send's ``msg_seq`` new;
- :mod:`.base`: the storage interface of the message-id map.

The backends are below: :mod:`.lmdb` (msgid-map.db, built on
:mod:`gensokyo_idmap.store.lmdb`'s environment) and :mod:`.redis` (every daemon of a
cluster on one Redis). Nothing here imports the bridge or either platform side
(import-linter contracts in pyproject.toml); they import the rules from here.
"""
