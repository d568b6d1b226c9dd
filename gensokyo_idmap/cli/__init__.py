"""``gensokyo-idmap``: one command line tool for the daemon and its stores.

Human output by default, ``--json`` for scripts. Bad input exits 2 with the reason and
writes nothing; other failures exit 1.

One module per command group (:mod:`.identity`, :mod:`.msgid`, :mod:`.store` with ``db``,
:mod:`.ops`, :mod:`.migration`, :mod:`.config` with ``init``, :mod:`.daemon` with ``serve``
and ``demo``), composed under the root command in :mod:`.root` (all but ``serve`` and
``demo`` imported at their first use, :mod:`.lazy`); what they share is in
:mod:`.context` (the root's options, the stores) and :mod:`.output` (output and errors).
The console script enters through :mod:`gensokyo_idmap.launch`, which refuses Windows first.
"""

from gensokyo_idmap.cli.root import main

__all__ = ["main"]
