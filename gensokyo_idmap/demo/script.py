"""Who says what, and when, on the demo platform: pure, seeded, no I/O.

A small cast chats in a few groups and in private, joins and leaves groups. The script is
an endless stream of :class:`Step` values, each with the seconds to wait before it; the
same seed gives the same stream, so a test can know what the demo will send. Turning a
step into the platform's event (:func:`event_of`) and into a line for the terminal
(:func:`step_line`, :func:`send_line`) is pure too; :mod:`gensokyo_idmap.demo.run` does
the waiting, the sending and the printing.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from typing import Any, ClassVar, Final

__all__ = [
    "CAST",
    "Cast",
    "Chat",
    "GroupSay",
    "Join",
    "Leave",
    "Person",
    "PrivateSay",
    "Step",
    "conversation",
    "event_of",
    "openid_of",
    "send_line",
    "step_line",
]


def openid_of(name: str) -> str:
    """A stable 32-hex-digit OpenID for a demo name (the platform's OpenIDs look so): the
    same person has the same OpenID in every run, so the demo's vUINs stay put."""
    return hashlib.sha256(f"gensokyo-demo:{name}".encode()).hexdigest()[:32].upper()


@dataclass(frozen=True, slots=True)
class _Named:
    """Someone or somewhere the platform names by an OpenID of ``KIND``."""

    KIND: ClassVar[str] = ""
    name: str

    @property
    def openid(self) -> str:
        return openid_of(f"{self.KIND}:{self.name}")


@dataclass(frozen=True, slots=True)
class Person(_Named):
    KIND: ClassVar[str] = "user"


@dataclass(frozen=True, slots=True)
class Chat(_Named):
    """A group."""

    KIND: ClassVar[str] = "group"


@dataclass(frozen=True, slots=True)
class Cast:
    """The people, the groups and who starts in which group."""

    people: tuple[Person, ...]
    groups: tuple[Chat, ...]
    members: Mapping[Chat, frozenset[Person]]

    def names(self) -> dict[str, str]:
        """OpenID → name, for the lines the bot's sends are shown as."""
        return ({p.openid: p.name for p in self.people}
                | {g.openid: g.name for g in self.groups})


def _cast() -> Cast:
    reimu, marisa, sakuya, youmu, sanae = (
        Person(n) for n in ("Reimu", "Marisa", "Sakuya", "Youmu", "Sanae"))
    shrine, mansion, garden = Chat("Hakurei Shrine"), Chat("Scarlet Mansion"), Chat("Netherworld")
    return Cast((reimu, marisa, sakuya, youmu, sanae), (shrine, mansion, garden), {
        shrine: frozenset({reimu, marisa, sanae}),
        mansion: frozenset({sakuya, marisa, reimu}),
        garden: frozenset({youmu, sakuya}),
    })


#: The demo's people and groups.
CAST: Final = _cast()

#: What people say. ``ping`` is there on purpose: the smallest bots (NoneBot's examples,
#: the project's e2e app) answer it, so a bot just connected has something to answer.
LINES: Final = (
    "ping", "ping", "hello everyone", "anyone around?", "tea is ready",
    "the barrier looks thin today", "who took my broom", "ping", "/help",
    "nice weather for a festival", "早上好", "see you at the shrine",
)


@dataclass(frozen=True, slots=True)
class GroupSay:
    person: Person
    group: Chat
    text: str
    at_bot: bool  # GROUP_AT_MESSAGE_CREATE (the bot was @-ed), else GROUP_MESSAGE_CREATE


@dataclass(frozen=True, slots=True)
class PrivateSay:
    person: Person
    text: str


@dataclass(frozen=True, slots=True)
class Join:
    person: Person
    group: Chat


@dataclass(frozen=True, slots=True)
class Leave:
    person: Person
    group: Chat


Action = GroupSay | PrivateSay | Join | Leave


@dataclass(frozen=True, slots=True)
class Step:
    """One thing that happens, ``delay`` seconds after the step before it."""

    delay: float
    action: Action


#: A group keeps at least this many members (someone must be left to talk).
MIN_MEMBERS: Final = 2


def conversation(seed: int, pace: float = 2.0, cast: Cast = CAST) -> Iterator[Step]:
    """The endless script of ``seed``: a step every ``pace`` seconds on average (0.5 to
    1.5 times it). Mostly group messages, some private ones, now and then a join or a
    leave; people speak only in groups they are in."""
    if pace < 0:
        raise ValueError(f"pace must not be negative: {pace}")
    rng = random.Random(seed)
    members = {group: set(cast.members.get(group, ())) for group in cast.groups}
    while True:
        delay = round(pace * rng.uniform(0.5, 1.5), 3)
        roll = rng.random()
        action: Action | None = None
        if roll < 0.1:
            action = _join(rng, cast, members)
        elif roll < 0.2:
            action = _leave(rng, members)
        elif roll < 0.4:
            action = PrivateSay(rng.choice(cast.people), rng.choice(LINES))
        if action is None:
            group = rng.choice([g for g in cast.groups if members[g]])
            person = rng.choice(sorted(members[group], key=lambda p: p.name))
            action = GroupSay(person, group, rng.choice(LINES), at_bot=rng.random() < 0.5)
        yield Step(delay, action)


def _join(rng: random.Random, cast: Cast, members: dict[Chat, set[Person]]) -> Join | None:
    open_seats = [(g, p) for g in cast.groups for p in cast.people if p not in members[g]]
    if not open_seats:
        return None
    group, person = rng.choice(open_seats)
    members[group].add(person)
    return Join(person, group)


def _leave(rng: random.Random, members: dict[Chat, set[Person]]) -> Leave | None:
    seats = [(g, p) for g, people in members.items() if len(people) > MIN_MEMBERS
             for p in sorted(people, key=lambda p: p.name)]
    if not seats:
        return None
    group, person = rng.choice(seats)
    members[group].discard(person)
    return Leave(person, group)


_CHINA: Final = timezone(timedelta(hours=8))  # the platform writes +08:00


def event_of(action: Action, message_id: str, now: float) -> tuple[str, dict[str, Any]]:
    """The platform's event for ``action``: its type and its ``d``, as the real platform
    sends them (``message_id``: the platform's id of the message, unique per event;
    ``now``: Unix seconds)."""
    if isinstance(action, GroupSay):
        person = action.person.openid
        return ("GROUP_AT_MESSAGE_CREATE" if action.at_bot else "GROUP_MESSAGE_CREATE", {
            "id": message_id, "content": action.text, "timestamp": _iso(now),
            "group_openid": action.group.openid,
            "author": {"id": person, "member_openid": person}})
    if isinstance(action, PrivateSay):
        person = action.person.openid
        return "C2C_MESSAGE_CREATE", {
            "id": message_id, "content": action.text, "timestamp": _iso(now),
            "author": {"id": person, "user_openid": person}}
    return ("GROUP_MEMBER_ADD" if isinstance(action, Join) else "GROUP_MEMBER_REMOVE", {
        "group_openid": action.group.openid, "member_openid": action.person.openid,
        "timestamp": int(now)})


def _iso(now: float) -> str:
    return datetime.fromtimestamp(int(now), _CHINA).isoformat()


def _clock(now: float) -> str:
    return datetime.fromtimestamp(now, UTC).astimezone().strftime("%H:%M:%S")


def step_line(action: Action, now: float) -> str:
    """The terminal line of what a simulated user did."""
    if isinstance(action, GroupSay):
        at = "@bot " if action.at_bot else ""
        return f"{_clock(now)}  [{action.group.name}] {action.person.name}: {at}{action.text}"
    if isinstance(action, PrivateSay):
        return f"{_clock(now)}  [private] {action.person.name}: {action.text}"
    verb = "joins" if isinstance(action, Join) else "leaves"
    return f"{_clock(now)}  [{action.group.name}] * {action.person.name} {verb}"


def send_line(method: str, path: str, body: Any, status: int, answer: Any,
              names: Mapping[str, str], now: float) -> str | None:
    """The terminal line of a call the bot made to the platform (through the daemon), or
    None for one not worth a line (token fetches, gateway discovery)."""
    parts = [part for part in path.split("/") if part]
    if len(parts) < 4 or parts[0] != "v2" or parts[1] not in ("groups", "users"):
        return None
    where = (f"[{names.get(parts[2], parts[2])}]" if parts[1] == "groups"
             else f"[private → {names.get(parts[2], parts[2])}]")
    if method == "DELETE":
        what = f"recalls {parts[-1]}"
    elif parts[3] == "files":
        what = "uploads a file"
    else:
        what = _content(body)
    outcome = "" if status < 300 else f"  (refused {status}: {_refusal(answer)})"
    return f"{_clock(now)}  {where} bot: {what}{outcome}"


def _content(body: Any) -> str:
    if not isinstance(body, Mapping):
        return "<no body>"
    text = str(body.get("content") or "")
    extra: Sequence[str] = [f"<{kind}>" for kind in ("media", "markdown", "ark", "embed",
                                                     "keyboard") if body.get(kind)]
    return " ".join([text, *extra]).strip() or "<empty>"


def _refusal(answer: Any) -> str:
    if isinstance(answer, Mapping):
        return f"{answer.get('code')} {answer.get('message')}"
    return str(answer)
