"""The old Go daemon's ``idmap.db`` (bbolt) → openid-map.db + msgid-map.db, once, atomically.

Rules (docs/stores.md, migrating; fixtures README "How each kind must land"):

1. **Forward keys win.** ``<id>`` → row is the number clients were shown most; every valid
   one keeps its number. ``row-<n>`` reverse keys and "pro" composite keys only fill what the
   forward side lacks; where they disagree, the other number becomes an **alias** (it keeps
   resolving to that person) unless it already names someone else, which is a conflict.
2. **No number names two people.** A fill or alias whose number is taken is a conflict; the
   identity then gets a fresh vUIN above every migrated number, and the report says so.
3. **All or nothing.** Everything is written in one write transaction of openid-map.db; the
   marker (``meta.migrated_from_legacy``) is written last, after every legacy mapping was
   checked against the new store. ``kill -9`` at any moment leaves no marker and no data, or
   everything. The legacy file is opened read-only and never changed, moved or deleted.
4. **Streamed.** The file is read bucket by bucket, in several passes, never loaded whole;
   the only thing kept in memory is the set of row numbers confirmed by a reverse key.
5. **Nothing silent.** Every entry not copied as is appears in the report with its reason.
6. **Seen to move.** ``progress(stage, done, total)`` hears of every ``_PROGRESS_EVERY``
   ``ids`` entries read, over all passes (see :mod:`migrate.progress`).
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Final

import structlog

from gensokyo_idmap.errors import (
    BadInputError,
    ConflictError,
    IdmapError,
    LegacyDbError,
    StoreError,
)
from gensokyo_idmap.identity import (
    MAX_KEY_BYTES,
    MAX_VUIN,
    RawId,
    check_app_id,
    is_platform_openid,
    openid_prefix,
)
from gensokyo_idmap.idmap import allocate_vuin, follow_alias, vuin_in_use
from gensokyo_idmap.runtime.blocks import MSG_RESERVED
from gensokyo_idmap.runtime.lmdb import LmdbMsgIdStore, MsgIdView
from gensokyo_idmap.runtime.msgid import INT32_MAX
from gensokyo_idmap.store.base import MIGRATION_MARKER
from gensokyo_idmap.store.lmdb.identity import LmdbIdentityStore, LmdbView
from migrate.bbolt import BoltFile
from migrate.progress import Progress

__all__ = ["MARKER", "MigrationReport", "MigrationVerifyError", "migrate_legacy"]

log = structlog.get_logger("gensokyo_idmap.migrate")

MARKER: Final = MIGRATION_MARKER
_ROW: Final = re.compile(r"[1-9][0-9]{0,18}")
# The same two tests on raw bytes, for the hot loops (cheaper than a regex call): 32 bytes
# that ``translate(None, _HEX_DIGITS)`` deletes entirely are OpenIDs
# (:func:`is_platform_openid`); a row suffix that ``isdigit()`` (ASCII digits, not empty),
# does not start with "0" and has at most 19 digits is ``_ROW``. Either way the bytes are
# ASCII, so their text is what the str patterns would have seen.
_HEX_DIGITS: Final = b"0123456789ABCDEFabcdef"
_ROW_PREFIX: Final = b"row-"
_PROGRESS_EVERY: Final = 5_000
_IDS: Final = (b"ids",)
_CACHE: Final = (b"cache",)
_CONFIG: Final = (b"config",)
_USERINFO: Final = (b"UserInfo",)


class MigrationVerifyError(StoreError):
    """A legacy mapping is not in the new store as it should be: no marker was written."""

    code = "migration_verify_failed"


@dataclass
class Entry:
    """One legacy entry the report mentions."""

    bucket: str
    key: str
    detail: str


@dataclass
class MigrationReport:
    legacy_path: str
    app_id: str
    status: str = "migrated"  # migrated | dry_run | already_migrated
    read: dict[str, int] = field(default_factory=dict)
    written: dict[str, int] = field(default_factory=dict)
    normalised: list[Entry] = field(default_factory=list)
    filled_from_reverse: list[Entry] = field(default_factory=list)
    reverse_rebuilt: list[Entry] = field(default_factory=list)
    aliases: list[Entry] = field(default_factory=list)
    conflicts: list[Entry] = field(default_factory=list)
    reissued: list[Entry] = field(default_factory=list)
    dropped: list[Entry] = field(default_factory=list)
    notes: list[Entry] = field(default_factory=list)
    counters: dict[str, int | None] = field(default_factory=dict)
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def summary_lines(self) -> list[str]:
        lines = [f"legacy file   {self.legacy_path}", f"status        {self.status}"]
        for bucket, count in self.read.items():
            lines.append(f"read          {bucket}: {count}")
        for table, count in self.written.items():
            lines.append(f"written       {table}: {count}")
        for name in ("normalised", "filled_from_reverse", "reverse_rebuilt", "aliases",
                     "conflicts", "reissued", "dropped", "notes"):
            entries: list[Entry] = getattr(self, name)
            lines.append(f"{name:<13} {len(entries)}")
            shown = entries if name in ("conflicts", "dropped", "reissued") else entries[:5]
            lines += [f"  {e.bucket}/{e.key}: {e.detail}" for e in shown]
            if len(shown) < len(entries):
                lines.append(f"  … {len(entries) - len(shown)} more (--json lists all)")
        for name, value in self.counters.items():
            lines.append(f"counter       {name}: {value}")
        lines.append(f"seconds       {self.seconds:.3f}")
        return lines


def _shown(raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return "0x" + raw.hex()


def _legacy_key(text: str, openid_prefix: str) -> str:
    """The identity key of a legacy id: a 32-hex id is an OpenID of our AppID, anything else
    ``raw:`` (BadInputError if it cannot be one).

    Called for every entry of every pass, so it builds the key text directly: a 32-hex id
    needs no further validation to be an OpenID key; anything else goes through RawId.
    """
    if is_platform_openid(text):
        return openid_prefix + text
    return RawId(text).key


def _row(text: str) -> int | None:
    if not _ROW.fullmatch(text):
        return None
    value = int(text)
    return value if value <= MAX_VUIN else None


def _row_reason(text: str) -> str:
    if not text:
        return "row- key without a number"
    if text.isdigit() and text.startswith("0"):
        return f"row number {text!r} has leading zeros (it must not alias row {int(text)})"
    if text.isdigit():
        return f"row number {text} is outside 1..{MAX_VUIN}"
    return f"row suffix {text!r} is not a number"


class _Passes:
    """Progress over the passes of one run, each of which reads the whole ``ids`` bucket:
    ``done`` counts the entries of the passes finished plus those of the current one."""

    def __init__(self, tell: Progress, entries: int, passes: int) -> None:
        self.tell = tell
        self.entries = entries  # the bucket's size (0: it could not be counted)
        self.passes = passes
        self.finished = 0

    @property
    def total(self) -> int:
        return self.entries * self.passes

    def at(self, stage: str, count: int) -> None:
        """``count`` entries into the current pass."""
        self.tell(stage, self.finished * self.entries + min(count, self.entries), self.total)

    def end_pass(self) -> None:
        self.finished += 1


class _Conversion:
    """One run of the conversion inside one write transaction (re-runnable from scratch).

    The hot loops (forward, reverse and verify over the ``ids`` bucket) take the legacy
    entries a leaf page at a time and handle the common case, a 32-hex OpenID with its
    8-byte row, inline: they talk to the view's LMDB transaction directly (same transaction,
    same encodings as :class:`LmdbView`: UTF-8 identity keys, vUINs as 8-byte big-endian,
    which is also how bbolt stored the rows, so a legacy row is its own LMDB encoding).
    Everything else (noise, normalised ids, conflicts, aliases) goes through the view and
    the original per-entry code paths.
    """

    def __init__(self, view: LmdbView, bolt: BoltFile, report: MigrationReport,
                 progress: Progress) -> None:
        self.view = view
        self.bolt = bolt
        self.report = report
        self.app_id = report.app_id
        self.prefix = openid_prefix(report.app_id)
        self.prefix_bytes = self.prefix.encode("utf-8")
        try:
            entries = bolt.entry_count(_IDS) if bolt.bucket(_IDS) is not None else 0
        except LegacyDbError:
            entries = 0  # damage: the passes say where; the total is unknown meanwhile
        self.fused = self.reverse_follows_forward()
        # the ids pass(es) and the verification; a pro pass is added when pro keys turn up
        self.passes = _Passes(progress, entries, (1 if self.fused else 2) + 1)
        self.confirmed: set[int] = set()  # forward numbers some row-<n> agrees with
        self.pending: list[tuple[str, str]] = []  # (bucket/key, identity key) to reissue
        self.highest = 0
        self.legacy_counter: int | None = None
        self.has_pro_keys = False  # the forward pass notes them; the pro pass runs only then
        # Where the forward pass's drops end in report.dropped, once the reverse work has
        # started inside the forward pass (see ids_passes): a non-UTF-8 row- key met there
        # is a forward-pass drop and goes before every reverse-pass drop, as in two passes.
        self.forward_drops_end: int | None = None
        txn, tables = view.bulk_handles()
        self.txn = txn
        self.forward_db = tables.identity_to_vuin
        self.sets_db = tables.vuin_to_identity
        self.alias_db = tables.vuin_alias

    # helpers
    def _ids(self) -> Iterator[tuple[bytes, str | None, bytes | None]]:
        """``ids`` entries as (raw key, text key or None if not UTF-8, value or None)."""
        for page in self.bolt.pages(_IDS):
            for key, value in page:
                try:
                    yield key, key.decode("utf-8"), value
                except UnicodeDecodeError:
                    yield key, None, value

    def _drop(self, bucket: str, key: bytes, reason: str) -> None:
        self.report.dropped.append(Entry(bucket, _shown(key), reason))

    def _place(self, key: str, vuin: int) -> None:
        self.view.set_vuin(key, vuin)
        self.view.add_identity(vuin, key)
        self.highest = max(self.highest, vuin)

    def _attach(self, where: str, key: str, number: int, source: str) -> None:
        """A number some non-forward entry gives ``key``: agree, fill, alias or conflict."""
        current = self.view.vuin_of(key)
        if current == number:
            return
        if current is None:
            if vuin_in_use(self.view, number):
                self.report.conflicts.append(Entry("ids", where, (
                    f"{source} gives {key} row {number}, which already names someone "
                    "else; a new vUIN is issued")))
                self.pending.append((where, key))
                return
            self._place(key, number)
            self.report.filled_from_reverse.append(
                Entry("ids", where, f"{key} → {number} (from {source})"))
            return
        if follow_alias(self.view, number) == current:
            return  # already an alias of the same person
        if vuin_in_use(self.view, number):
            self.report.conflicts.append(Entry("ids", where, (
                f"{source} says row {number} for {key}, the forward key says {current}; "
                f"{number} already names someone else, so it is not kept")))
            return
        self.view.set_alias(number, current)
        self.highest = max(self.highest, number)
        self.report.aliases.append(Entry("ids", where, (
            f"row {number} kept as an alias of {current} ({source} disagrees with the "
            "forward key)")))

    # passes
    def reverse_follows_forward(self) -> bool:
        """Whether every key the forward pass handles sorts before every ``row-`` key.

        bbolt keeps a bucket's keys in byte order, so the ``row-`` keys are one contiguous
        run; if the greatest key is in that run (or before it), nothing the forward pass
        handles comes after a ``row-`` key, and one pass in key order does all the forward
        work before any reverse work, exactly as two passes would. The usual case: 32-hex
        ids, ``currentRow`` and pro keys all sort before ``row-``. When in doubt (an empty
        rightmost leaf, or damage, which the passes then report in their usual order): no.
        """
        try:
            last = self.bolt.last_key(_IDS)
        except LegacyDbError:
            return False
        return last is not None and (last < _ROW_PREFIX or last.startswith(_ROW_PREFIX))

    def ids_passes(self) -> None:
        """The forward pass and then the reverse pass; one pass doing both when
        :meth:`reverse_follows_forward`, else two."""
        passes = self.passes
        if self.fused:
            self._ids_pass(forward=True, reverse=True)
            if self.forward_drops_end is None:  # no row- key: the reverse pass had nothing
                passes.at("ids reverse keys", passes.entries)
            passes.end_pass()
        else:
            self._ids_pass(forward=True, reverse=False)
            passes.end_pass()
            passes.at("ids reverse keys", 0)
            self._ids_pass(forward=False, reverse=True)
            passes.end_pass()

    def _ids_pass(self, *, forward: bool, reverse: bool) -> None:
        """One pass over ``ids`` in key order doing the forward work, the reverse work or
        both (then every forward key comes before every ``row-`` key: see above).

        The common entries are handled inline; anything else goes to :meth:`_forward_entry`
        or :meth:`_reverse_entry`, the rules in full.
        """
        prefix = self.prefix_bytes
        hex_digits = _HEX_DIGITS
        get = self.txn.get
        put = self.txn.put
        forward_db = self.forward_db
        sets_db = self.sets_db
        confirm = self.confirmed.add
        from_bytes = int.from_bytes
        highest = 0
        count = 0
        next_progress = _PROGRESS_EVERY
        stage = "ids forward" if forward else "ids reverse keys"
        tell = self.passes.at
        if forward:
            tell(stage, 0)
        in_reverse = False  # a row- key was handled (only when both passes are fused)
        for page in self.bolt.pages(_IDS):
            if count >= next_progress:  # (entries before this page: a new stage starts here)
                tell(stage, count)
                next_progress = count + _PROGRESS_EVERY
            count += len(page)
            for raw, value in page:
                if len(raw) == 32 and not raw.translate(None, hex_digits):
                    if not forward:
                        continue
                    if in_reverse:
                        raise LegacyDbError(
                            f"{self.bolt.path}: ids key {_shown(raw)} comes after the row- "
                            "keys it sorted before: the file changed while it was read")
                    if value is not None and len(value) == 8:
                        number = from_bytes(value, "big")
                        if 0 < number <= MAX_VUIN:
                            key = prefix + raw
                            # NOOVERWRITE: refused if the number already names someone
                            if put(value, key, db=sets_db, overwrite=False):
                                # bbolt order is LMDB order for these keys: appending
                                # skips the search; refused unless key > the last one
                                put(key, value, db=forward_db, append=True) or put(
                                    key, value, db=forward_db)
                                if number > highest:  # not max(): a call costs on this loop
                                    highest = number
                            else:
                                self._forward_conflict(raw.decode("ascii"), key.decode("ascii"),
                                                       number)
                            continue
                    self._forward_entry(raw, value)
                elif raw.startswith(_ROW_PREFIX):
                    if not reverse:
                        if forward:
                            self._forward_entry(raw, value)  # drops a non-UTF-8 key
                        continue
                    if not in_reverse and forward:
                        in_reverse = True
                        self.forward_drops_end = len(self.report.dropped)
                        stage = "ids reverse keys"
                        tell(stage, count - len(page))
                    digits = raw[4:]
                    if (digits.isdigit() and digits[0] != 48 and len(digits) <= 19  # 48: "0"
                            and value and len(value) == 32
                            and not value.translate(None, hex_digits)
                            and (number := int(digits)) <= MAX_VUIN):
                        key = prefix + value
                        if get(key, db=forward_db) == number.to_bytes(8, "big"):
                            confirm(number)
                        else:
                            self._attach(raw.decode("ascii"), key.decode("ascii"), number,
                                         "reverse key")
                        continue
                    self._reverse_entry(raw, value)
                elif forward:
                    if in_reverse:
                        raise LegacyDbError(
                            f"{self.bolt.path}: ids key {_shown(raw)} comes after the row- "
                            "keys it sorted before: the file changed while it was read")
                    self._forward_entry(raw, value)
        self.highest = max(self.highest, highest)
        if forward:
            self.report.read["ids"] = count

    def _forward_conflict(self, text: str, key: str, number: int) -> None:
        self.report.conflicts.append(Entry("ids", text, (
            f"row {number} is also the forward row of another id; a new vUIN is issued")))
        self.pending.append((text, key))

    def _forward_entry(self, raw: bytes, value: bytes | None) -> None:
        """The forward rules for one ``ids`` entry (reverse keys are left to the reverse
        pass, pro keys to the pro pass)."""
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            self._drop("ids", raw, "key is not UTF-8")
            return
        if text == "currentRow":
            counter = int.from_bytes(value, "big") if value and len(value) == 8 else None
            if counter is not None and counter <= MAX_VUIN:
                self.legacy_counter = counter
            else:
                self._drop("ids", raw, f"currentRow is not an 8-byte counter within "
                                       f"1..{MAX_VUIN}")
            return
        if text.startswith("row-"):
            return  # reverse keys: next pass
        if ":" in text:
            self.has_pro_keys = True  # pro keys: the pass after
            return
        if value is None:
            self._drop("ids", raw, "a nested bucket where an id was expected")
            return
        if len(value) != 8:
            self._drop("ids", raw, f"forward value is {len(value)} bytes, not an 8-byte row")
            return
        number = int.from_bytes(value, "big")
        if not 0 < number <= MAX_VUIN:
            self._drop("ids", raw, f"row {number} is outside 1..{MAX_VUIN}")
            return
        try:
            key = _legacy_key(text, self.prefix)
        except BadInputError as err:
            self._drop("ids", raw, f"id cannot be a key: {err.reason}")
            return
        if self.view.has_identities(number):
            self._forward_conflict(text, key, number)
            return
        self._place(key, number)
        if not key.startswith(self.prefix):
            self.report.normalised.append(
                Entry("ids", text, f"not a 32-hex OpenID: stored as {key}"))

    def _reverse_entry(self, raw: bytes, value: bytes | None) -> None:
        """The reverse rules for one ``row-`` key."""
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            if self.forward_drops_end is not None:
                # a forward-pass drop met inside the fused pass: it goes where the forward
                # pass's drops end, before the reverse pass's own (as with two passes)
                self.report.dropped.insert(self.forward_drops_end,
                                           Entry("ids", _shown(raw), "key is not UTF-8"))
                self.forward_drops_end += 1
            return
        number = _row(text[4:])
        if number is None:
            self._drop("ids", raw, _row_reason(text[4:]))
            return
        if not value:
            self._drop("ids", raw, "reverse key with an empty value")
            return
        try:
            key = _legacy_key(value.decode("utf-8"), self.prefix)
        except UnicodeDecodeError:
            self._drop("ids", raw, "reverse value is not UTF-8")
            return
        except BadInputError as err:
            self._drop("ids", raw, f"reverse value cannot be a key: {err.reason}")
            return
        if self.view.vuin_of(key) == number:
            self.confirmed.add(number)
            return
        self._attach(text, key, number, "reverse key")

    def pro_keys(self) -> None:
        if not self.has_pro_keys:
            return
        self.passes.passes += 1
        self.passes.at("ids pro keys", 0)
        for count, (raw, text, value) in enumerate(self._ids(), 1):
            if count % _PROGRESS_EVERY == 0:
                self.passes.at("ids pro keys", count)
            if text is None or text.startswith("row-") or ":" not in text:
                continue
            try:
                other = (value or b"").decode("utf-8")
            except UnicodeDecodeError:
                self._drop("ids", raw, "pro value is not UTF-8")
                continue
            left, right = text.split(":", 1), other.split(":", 1)
            if len(left) != 2 or len(right) != 2:
                self._drop("ids", raw, "pro entry is not <a>:<b> on both sides")
                continue
            ids, rows = (right, left) if all(p.isdigit() for p in left) else (left, right)
            numbers = [_row(p) for p in rows]
            if None in numbers or not all(ids):
                self._drop("ids", raw, f"pro entry {text!r} → {other!r} has no valid rows")
                continue
            for ident_text, number in zip(ids, numbers, strict=True):
                assert number is not None
                try:
                    key = _legacy_key(ident_text, self.prefix)
                except BadInputError as err:
                    self._drop("ids", raw, f"pro id cannot be a key: {err.reason}")
                    break
                self._attach(text, key, number, "pro key")

    def reissue(self) -> None:
        counter = max(self.highest, self.legacy_counter or 0, self.view.vuin_counter())
        if self.legacy_counter is not None and self.legacy_counter < self.highest:
            self.report.notes.append(Entry("ids", "currentRow", (
                f"currentRow {self.legacy_counter} is below migrated row {self.highest} "
                f"(hash mode, or a stale counter): new vUINs start above {counter}")))
        self.view.set_vuin_counter(counter)
        for where, key in self.pending:
            if self.view.vuin_of(key) is not None:
                continue  # another entry placed it meanwhile
            number = allocate_vuin(self.view)
            self._place(key, number)
            self.report.reissued.append(Entry("ids", where, f"{key} → new vUIN {number}"))

    def copy_bucket(self, name: str, path: tuple[bytes, ...], put: Callable[[bytes, bytes],
                    None], check_json: bool) -> None:
        count = 0
        for key, value in self.bolt.items(path):
            count += 1
            if value is None:
                self._drop(name, key, "nested bucket (not copied)")
                continue
            if len(key) > MAX_KEY_BYTES:  # bbolt allowed up to 32 KiB
                self._drop(name, key, f"key is {len(key)} bytes; the new store takes at most "
                                      f"{MAX_KEY_BYTES}")
                continue
            put(key, value)
            if check_json:
                try:
                    parsed = json.loads(value)
                    if not isinstance(parsed, dict) or not {"nickname", "remark",
                                                           "user_id"} <= parsed.keys():
                        self.report.notes.append(Entry(name, _shown(key), (
                            "JSON lacks nickname/remark/user_id (copied as is)")))
                except (ValueError, UnicodeDecodeError, RecursionError):
                    self.report.notes.append(
                        Entry(name, _shown(key), "value is not valid JSON (copied as is)"))
            else:
                text = _shown(key)
                if ":" not in text:
                    self.report.notes.append(
                        Entry(name, text, "key has no <section>:<key> colon (copied as is)"))
                elif not value:
                    self.report.notes.append(Entry(name, text, "empty value (copied as is)"))
        self.report.read[name] = count

    def verify(self) -> None:
        """Every legacy mapping that was kept must read back from the new store.

        The same pass notes the forward keys that had no ``row-<n>`` (reverse rebuilt).
        The common entries are checked inline against the raw store values (a forward row
        must be stored byte for byte as bbolt held it; a ``row-<n>`` that names the vUIN
        of its id and no alias resolves to it); the rest by :meth:`_verify_entry`.
        """
        skipped = {e.key.encode("utf-8") for e in self.report.conflicts}
        skipped |= {e.key.encode("utf-8") for e in self.report.dropped}
        prefix = self.prefix_bytes
        hex_digits = _HEX_DIGITS
        get = self.txn.get
        forward_db = self.forward_db
        alias_db = self.alias_db
        confirmed = self.confirmed
        rebuilt = self.report.reverse_rebuilt.append
        from_bytes = int.from_bytes
        # read from the store itself: with no alias at all, no number is an alias
        no_aliases = self.txn.stat(alias_db)["entries"] == 0
        tell = self.passes.at
        count = 0
        next_progress = _PROGRESS_EVERY
        for page in self.bolt.pages(_IDS):
            if count >= next_progress:
                tell("verifying", count)
                next_progress = count + _PROGRESS_EVERY
            count += len(page)
            for raw, value in page:
                if skipped and raw in skipped:
                    continue
                if len(raw) == 32 and not raw.translate(None, hex_digits):
                    if value is None or len(value) != 8:
                        continue  # dropped
                    if get(prefix + raw, db=forward_db) != value:
                        raise MigrationVerifyError(
                            f"verification: {self.prefix}{raw.decode('ascii')} does not map "
                            "to its legacy row")
                    number = from_bytes(value, "big")
                    if number not in confirmed:
                        rebuilt(Entry("ids", raw.decode("ascii"),
                                      f"no row-{number} key: reverse side rebuilt"))
                    continue
                if (raw.startswith(_ROW_PREFIX) and (digits := raw[4:]).isdigit()
                        and digits[0] != 48 and len(digits) <= 19  # 48: "0"; see _HEX_DIGITS
                        and value and len(value) == 32 and not value.translate(None, hex_digits)
                        and (number := int(digits)) <= MAX_VUIN):
                    encoded = number.to_bytes(8, "big")
                    if get(prefix + value, db=forward_db) == encoded and (
                            no_aliases or get(encoded, db=alias_db) is None):
                        continue  # the id has this very vUIN, and it is no alias
                self._verify_entry(raw, value)
        for bucket, copied in (("config", self.view.iter_config()),
                               ("UserInfo", self.view.iter_user_info())):
            not_copied = sum(1 for e in self.report.dropped if e.bucket == bucket)
            if sum(1 for _ in copied) != self.report.read.get(bucket, 0) - not_copied:
                raise MigrationVerifyError(
                    f"verification: {bucket} entries differ from the legacy file")

    def _verify_entry(self, raw: bytes, value: bytes | None) -> None:
        """The verification of one ``ids`` entry not in the conflicts nor dropped."""
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            return
        if text == "currentRow":
            return
        if text.startswith("row-"):
            number = _row(text[4:])
            if number is None or not value:
                return
            key = _legacy_key(value.decode("utf-8"), self.prefix)
            got = self.view.vuin_of(key)
            if got is None or follow_alias(self.view, number) != got:
                raise MigrationVerifyError(
                    f"verification: {text} → {key} does not resolve in the new store")
        elif ":" not in text and value is not None and len(value) == 8:
            key = _legacy_key(text, self.prefix)
            number = int.from_bytes(value, "big")
            if self.view.vuin_of(key) != number:
                raise MigrationVerifyError(
                    f"verification: {key} does not map to its legacy row")
            if number not in self.confirmed:
                self.report.reverse_rebuilt.append(
                    Entry("ids", text, f"no row-{number} key: reverse side rebuilt"))

    def run(self) -> MigrationReport:
        self.ids_passes()
        self.pro_keys()
        if self.has_pro_keys:
            self.passes.end_pass()
        self.reissue()
        names = set(self.bolt.bucket_names())
        if b"config" in names:
            self.copy_bucket("config", _CONFIG, self.view.put_config, check_json=False)
        if b"UserInfo" in names:
            self.copy_bucket("UserInfo", _USERINFO, self.view.put_user_info, check_json=True)
        self.passes.at("verifying", 0)
        self.verify()
        self.passes.end_pass()
        self.passes.tell("verified", self.passes.total, self.passes.total)
        counts, legacy = self.view.counts(), self.view.legacy_counts()
        self.report.written = {"identity_to_vuin": counts.identities, "vuins": counts.vuins,
                               "vuin_alias": counts.aliases, "config": legacy.config,
                               "UserInfo": legacy.user_info}
        self.report.counters["legacy_current_row"] = self.legacy_counter
        self.report.counters["vuin_counter"] = self.view.vuin_counter()
        return self.report


def _cache_counter(bolt: BoltFile, report: MigrationReport) -> int | None:
    """The old message-id counter: ``cache/currentRow`` by one lookup (entries are not
    copied, so they are not read); only when it is missing, the highest ``row-<n>``."""
    if bolt.bucket(_CACHE) is None:
        return None
    raw = bolt.get(_CACHE, b"currentRow")
    if raw is not None and len(raw) == 8:
        return int.from_bytes(raw, "big")  # the old daemon's own counter, as it was
    highest = 0
    count = 0
    for key, _value in bolt.items(_CACHE):  # CleanBucket deleted currentRow by mistake
        count += 1
        if key.startswith(b"row-"):
            number = _row(key[4:].decode("utf-8", "replace"))
            if number is not None:
                highest = max(highest, number)
    report.read["cache"] = count
    return highest or None


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


class _Sha256Thread:
    """The legacy file's sha256 (for the marker), computed on a thread while the conversion
    runs: hashlib and file reads release the GIL, so on a second core it costs the
    conversion nearly nothing. :meth:`result` waits for it and raises what it raised."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._digest: str | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="legacy-sha256", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._digest = _file_sha256(self._path)
        except BaseException as exc:  # noqa: BLE001 - handed to the caller by result()
            self._error = exc

    def result(self) -> str:
        self._thread.join()
        if self._error is not None:
            raise self._error
        assert self._digest is not None
        return self._digest

    def wait(self) -> None:
        """Let the thread end (its outcome unused): no thread outlives the migration."""
        self._thread.join()


def migrate_legacy(
    legacy_path: str | Path,
    identity_store: LmdbIdentityStore,
    msgid_store: LmdbMsgIdStore | None,
    app_id: str,
    *,
    dry_run: bool = False,
    progress: Progress | None = None,
    clock: Callable[[], float] = time.time,
) -> MigrationReport:
    """Migrate ``legacy_path`` into the stores once; see the module rules.

    ``progress(stage, done, total)`` is called as the work proceeds (rule 6).
    """
    path = Path(legacy_path)
    started = time.perf_counter()
    report = MigrationReport(legacy_path=str(path), app_id=app_id)
    with identity_store.read() as view:
        marker = view.get_meta(MARKER)
        held = view.counts()
    if marker is not None:
        report.status = "already_migrated"
        log.info("[migrate] nothing to do: openid-map.db already holds a migration",
                 marker_time=marker.get("at"), legacy=str(path))
        return report
    if not path.is_file():
        raise BadInputError("legacy", str(path), "no such file")
    if held.identities or held.aliases:
        raise ConflictError(
            f"openid-map.db already holds {held.identities} identities but no migration "
            f"marker, so {path.name} is not merged into it. To migrate: move openid-map.db "
            "aside and start again. To keep the current store: move idmap.db away "
            "(or set idmap.legacy_db to an empty value)."
        )
    check_app_id(app_id, "bot.app_id")
    tell: Progress = progress or (lambda stage, done, total: None)
    log.info("[migrate] start", legacy=str(path), dry_run=dry_run)
    hasher = _Sha256Thread(path)
    try:
        report = _migrate_open(path, identity_store, msgid_store, app_id, report, hasher,
                               dry_run, tell, clock)
    finally:
        hasher.wait()
    report.status = "dry_run" if dry_run else "migrated"
    report.seconds = time.perf_counter() - started
    log.info("[migrate] done", status=report.status, read=report.read, written=report.written,
             dropped=len(report.dropped), conflicts=len(report.conflicts),
             seconds=round(report.seconds, 3))
    return report


def _migrate_open(path: Path, identity_store: LmdbIdentityStore,
                  msgid_store: LmdbMsgIdStore | None, app_id: str, report: MigrationReport,
                  hasher: _Sha256Thread, dry_run: bool, tell: Progress,
                  clock: Callable[[], float]) -> MigrationReport:
    """The migration proper, the legacy file open (its sha256 being computed meanwhile)."""
    with BoltFile(path) as bolt:
        msg_counter = _cache_counter(bolt, report)
        meta_notes = [Entry("(meta)", "meta", problem) for problem in bolt.meta_problems]

        def convert(view: LmdbView) -> MigrationReport:
            fresh = MigrationReport(legacy_path=str(path), app_id=app_id,
                                    read=dict(report.read))
            fresh.notes.extend(meta_notes)  # e.g. the newest meta page was damaged
            result = _Conversion(view, bolt, fresh, tell).run()
            result.counters["legacy_cache_counter"] = msg_counter
            sha256 = hasher.result()  # (a dry run too: a file that cannot be read fails)
            if msg_counter and not dry_run:
                # the old message ids feed the high-water mark too: a msgid-map.db lost
                # later (or none given here) still goes on above them (runtime.blocks)
                held = view.get_meta(MSG_RESERVED)
                view.set_meta(MSG_RESERVED, max(held if isinstance(held, int) else 0,
                                                msg_counter % INT32_MAX))
            if not dry_run:
                view.set_meta(MARKER, {
                    "legacy_path": str(path.resolve()),
                    "legacy_sha256": sha256,
                    "at": clock(),
                    "read": result.read,
                    "written": result.written,
                    "dropped": len(result.dropped),
                    "conflicts": len(result.conflicts),
                })
            return result

        if msgid_store is not None and msg_counter and not dry_run:
            carried = msg_counter % INT32_MAX

            def raise_counter(view: MsgIdView) -> None:
                view.set_msg_counter(max(view.msg_counter(), carried))

            msgid_store.transact(raise_counter)
        try:
            report = identity_store.transact(convert, commit=not dry_run)
        except IdmapError:
            log.error("[migrate] failed: nothing was written, no marker", legacy=str(path))
            raise
    return report
