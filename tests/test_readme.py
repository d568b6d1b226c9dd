"""Every shell example in README.md and docs/*.md runs as written and exits as documented.

What runs: in each ```sh block, in order, every line whose command is ``gensokyo-idmap`` (or a
path ending in ``/gensokyo-idmap``, such as ``.venv/bin/gensokyo-idmap``) or ``curl``,
through bash (so ``$(date +%F)`` works). Other lines of a block (``make run``, ``mkdir``…)
are not run. Each block runs in a fresh directory holding what the page tells a reader to
have there:

- ``examples/config.yml`` (this checkout's) and ``old/config.yml`` (a Go Gensokyo config,
  ``tests/fixtures/gensokyo/config.yml``);
- ``data/`` as the daemon leaves it at its first start (empty ``openid-map.db``,
  ``msgid-map.db`` and ``outbox.db``), plus ``data/idmap.db``, an old Go daemon's file
  (``tests/fixtures/legacy/small-counter.db``) where the migration section says to put it;
- ``backups/`` (empty) and ``.venv`` (this checkout's virtualenv, for ``.venv/bin/…``);
- for a block that reads ``--config config.yml`` (docs/stores.md's PostgreSQL sections): a
  ``config.yml`` whose identity graph is PostgreSQL, in a schema of the test's own (skipped,
  saying so, without a PostgreSQL; see tests/store_backends.py).

Expected exit: 0, or N when the line's comment starts with ``exits N``.

A ``gensokyo-idmap … serve …`` line (a trailing ``&`` is allowed) starts the daemon for the
rest of its block, with its listeners moved to free ports and nothing dialled out (reverse WS,
HTTP POST and the QQ gateway off) through ``GSK_*`` variables; the block's curl lines are sent
to the moved ports. At the end of the block the daemon gets SIGTERM and must exit 0.

An illustrative example (placeholders such as ``PATH`` or ``FILE``, or something that needs a
live QQ platform, several daemons or a Redis) goes in a block fenced ```text instead of
```sh: only ```sh blocks run.
"""

from __future__ import annotations

import os
import queue
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import pytest

from gensokyo_idmap.config import load_config
from gensokyo_idmap.hostport import parse_host_port
from gensokyo_idmap.store.lmdb.identity import LmdbIdentityStore
from gensokyo_idmap.runtime.lmdb import open_msgid_store
from gensokyo_idmap.store.lmdb.outbox import LmdbOutboxStore

from gensokyo_idmap.testing.loopback import free_port

from .store_backends import fresh_schema, postgres_config

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
#: The pages whose ```sh blocks run: the README and every page of docs/.
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]
FIXTURES = Path(__file__).resolve().parent / "fixtures"
VENV_BIN = Path(sys.executable).parent
COMMAND_TIMEOUT = 120.0
READY_TIMEOUT = 60.0
#: The listeners a ``serve`` example gets moved to free ports: config key → GSK_ variable.
LISTENERS = {("webhook", "listen"): "GSK_WEBHOOK__LISTEN",
             ("onebot", "forward_ws"): "GSK_ONEBOT__FORWARD_WS",
             ("onebot", "http_api"): "GSK_ONEBOT__HTTP_API",
             ("api", "listen"): "GSK_API__LISTEN"}
_EXITS = re.compile(r"\s#\s*exits (\d+)\b")


@dataclass(frozen=True, slots=True)
class Example:
    line: int  # in its page
    text: str
    argv: tuple[str, ...]

    @property
    def expected_exit(self) -> int:
        found = _EXITS.search(self.text)
        return int(found.group(1)) if found else 0

    @property
    def serves(self) -> bool:
        return "serve" in self.argv[1:]


@dataclass(frozen=True, slots=True)
class Block:
    line: int
    examples: tuple[Example, ...]
    page: str = "README.md"

    def where(self, example: Example) -> str:
        return f"{self.page}:{example.line}: {example.text}"

    @property
    def needs_postgres(self) -> bool:
        """It reads ``--config config.yml``: the PostgreSQL config of docs/stores.md."""
        return any(pair == ("--config", "config.yml") for e in self.examples
                   for pair in zip(e.argv, e.argv[1:], strict=False))


def _is_ours(argv: list[str]) -> bool:
    return bool(argv) and (argv[0] == "curl" or argv[0] == "gensokyo-idmap"
                           or argv[0].endswith("/gensokyo-idmap"))


def sh_blocks(text: str, page: str = "README.md") -> list[Block]:
    """The ```sh blocks of ``text`` (the page ``page``) with the lines this test runs
    (continuations joined)."""
    blocks: list[Block] = []
    lines = text.splitlines()
    n = 0
    while n < len(lines):
        fence = re.fullmatch(r"```(\S*)\s*", lines[n])
        n += 1
        if fence is None:
            continue
        start, body = n, []
        while n < len(lines) and not lines[n].startswith("```"):
            body.append((n + 1, lines[n]))
            n += 1
        n += 1  # the closing fence
        if fence.group(1) != "sh":
            continue
        examples: list[Example] = []
        pending = ""
        first = 0
        for number, raw in body:
            if not pending:
                first = number
            if raw.endswith("\\"):
                pending += raw[:-1] + " "
                continue
            joined, pending = pending + raw, ""
            try:
                argv = shlex.split(joined, comments=True)
            except ValueError as exc:
                raise AssertionError(f"{page}:{first}: not shell syntax: {exc}") from None
            if argv and argv[-1] == "&":
                argv = argv[:-1]
            if _is_ours(argv):
                examples.append(Example(first, joined.strip(), tuple(argv)))
        blocks.append(Block(start, tuple(examples), page))
    return blocks


BLOCKS = [block for page in PAGES
          for block in sh_blocks(page.read_text(encoding="utf-8"), str(page.relative_to(ROOT)))
          if block.examples]


def test_the_pages_have_examples_to_run() -> None:
    """A guard against a parser that finds nothing (and a test that passes vacuously)."""
    examples = [e for block in BLOCKS if block.page == "README.md" for e in block.examples]
    assert len(examples) >= 15, examples
    assert any(e.serves for e in examples) and any(e.argv[0] == "curl" for e in examples)
    pages = {block.page for block in BLOCKS}
    assert {"docs/identities.md", "docs/stores.md"} <= pages, pages
    assert any(block.needs_postgres for block in BLOCKS)


def test_the_parser_reads_what_the_docstring_says() -> None:
    text = ("```sh\nmake run\ngensokyo-idmap --data-dir ./data stats   # exits 1\n"
            ".venv/bin/gensokyo-idmap verify \\\n  --json\n```\n"
            "```text\ngensokyo-idmap verify [FILE]\n```\n"
            "```sh\ngensokyo-idmap serve --config c.yml &\ncurl -fsS 'http://h:1/x#y'\n```\n")
    first, second = sh_blocks(text)
    assert [(e.line, e.argv, e.expected_exit) for e in first.examples] == [
        (3, ("gensokyo-idmap", "--data-dir", "./data", "stats"), 1),
        (4, (".venv/bin/gensokyo-idmap", "verify", "--json"), 0)]
    assert [e.serves for e in second.examples] == [True, False]
    assert second.examples[1].argv == ("curl", "-fsS", "http://h:1/x#y")


def _prepare(where: Path) -> None:
    """The directory a reader of the README is in (see the module docstring)."""
    (where / "examples").mkdir(parents=True)
    shutil.copyfile(ROOT / "examples" / "config.yml", where / "examples" / "config.yml")
    (where / "old").mkdir()
    shutil.copyfile(FIXTURES / "gensokyo" / "config.yml", where / "old" / "config.yml")
    data = where / "data"
    LmdbIdentityStore(data / "openid-map.db").close()
    open_msgid_store(data / "msgid-map.db").close()
    LmdbOutboxStore(data / "outbox.db").close()
    shutil.copyfile(FIXTURES / "legacy" / "small-counter.db", data / "idmap.db")
    (where / "backups").mkdir()
    (where / ".venv").symlink_to(VENV_BIN.parent, target_is_directory=True)


def _environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GSK_")}
    env["PATH"] = f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}"
    env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost,::1"
    return env


class Daemon:
    """A ``serve`` example running for the rest of its block, on ports of its own."""

    def __init__(self, example: Example, where: Path, env: dict[str, str],
                 page: str = "README.md") -> None:
        self.page = page
        config_file = example.argv[example.argv.index("--config") + 1]
        config = load_config(where / config_file, {})
        self.ports: dict[int, int] = {}
        env = {**env, "GSK_ONEBOT__REVERSE_WS": "[]", "GSK_ONEBOT__HTTP_POST": "[]",
               "GSK_QQ__GATEWAY": "false"}
        for (section, key), var in LISTENERS.items():
            listen = getattr(getattr(config, section), key)
            if listen:
                documented = parse_host_port(listen, f"{section}.{key}")
                moved = free_port()
                self.ports[documented.port] = moved
                env[var] = documented._replace(port=moved).text
        self.proc = subprocess.Popen(["bash", "-c", "exec " + shlex.join(example.argv)],
                                     cwd=where, env=env, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True)
        self.output: list[str] = []
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self._wait_ready(example)

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._lines.put(line)
        self._lines.put(None)

    def _wait_ready(self, example: Example) -> None:
        deadline = time.monotonic() + READY_TIMEOUT
        while time.monotonic() < deadline:
            try:
                line = self._lines.get(timeout=0.1)
            except queue.Empty:
                continue
            if line is None:
                break
            self.output.append(line)
            if "[app] ready" in line:
                return
        raise AssertionError(f"{self.page}:{example.line}: {example.text!r} did not get ready:\n"
                             + "".join(self.output))

    def moved(self, text: str) -> str:
        """``text`` with the documented listener ports replaced by the ones in use."""
        for documented, moved in self.ports.items():
            text = re.sub(rf"(?<=:){documented}\b", str(moved), text)
        return text

    def stop(self, sig: signal.Signals = signal.SIGTERM) -> int:
        """Signal the daemon, wait for it (killed if it takes too long), collect its output."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout=30)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait(timeout=10)
            self._reader.join(timeout=10)
            assert self.proc.stdout is not None
            self.proc.stdout.close()
            while (line := self._lines.get_nowait() if not self._lines.empty() else None):
                self.output.append(line)


@pytest.fixture
def daemons() -> Iterator[list[Daemon]]:
    started: list[Daemon] = []
    yield started
    for daemon in started:  # a failed example must not leave a daemon behind
        if not daemon.proc.stdout or not daemon.proc.stdout.closed:
            daemon.stop(signal.SIGKILL)


@pytest.mark.parametrize("block", BLOCKS, ids=[f"{b.page}:{b.line}" for b in BLOCKS])
def test_block_runs_as_written(block: Block, tmp_path: Path, daemons: list[Daemon]) -> None:
    _prepare(tmp_path)
    env = _environment()
    with ExitStack() as stack:
        if block.needs_postgres:
            schema = stack.enter_context(fresh_schema(create=True))
            postgres_config(tmp_path / "config.yml", schema, app_id="102000001",
                            data_dir=Path("data"))
        _run_block(block, tmp_path, env, daemons)


def _run_block(block: Block, where_dir: Path, env: dict[str, str],
               daemons: list[Daemon]) -> None:
    for example in block.examples:
        where = block.where(example)
        if example.serves:
            daemons.append(Daemon(example, where_dir, env, block.page))
            continue
        text = example.text.rstrip().removesuffix("&")
        if example.argv[0] == "curl":
            assert daemons, f"{where}: a curl example needs a serve example before it"
            text = daemons[-1].moved(text)
        done = subprocess.run(["bash", "-c", text], cwd=where_dir, env=env,
                              capture_output=True, text=True, timeout=COMMAND_TIMEOUT)
        shown = f"{where}\nexit {done.returncode}\n{done.stdout}\n{done.stderr}"
        assert done.returncode == example.expected_exit, shown
        assert "Traceback" not in done.stderr, shown
    for daemon in daemons:
        assert daemon.stop() == 0, "".join(daemon.output)
