"""The project's own documentation: README, docs/, examples/config.yml and every text a user
reads (``--help``, the config schema, the OpenAPI document) agree with each other and with
the code, and point at nothing outside the repository."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import click
import pytest
import yaml
from click.testing import CliRunner

from gensokyo_idmap.api.openapi import openapi_document
from gensokyo_idmap.cli import main
from gensokyo_idmap.config import Config

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
EXAMPLE = ROOT / "examples" / "config.yml"
CLUSTER_EXAMPLE = ROOT / "examples" / "cluster.yml"
#: Keys the example turns on for `make run` (their built-in default is empty).
EXAMPLE_CHOICES = {"bot.app_id", "webhook.listen", "onebot.forward_ws", "onebot.reverse_ws"}
USER_DOCS = ["identities.md", "stores.md", "delivery.md", "wire-mapping.md", "testing.md",
             "demo.md", "security.md", "operations.md", "architecture.md", "bots.md",
             "translations.md"]


def leaves(value: Any, path: tuple[str, ...] = ()) -> dict[str, Any]:
    """Every leaf of a nested mapping by its dotted key path."""
    if isinstance(value, dict):
        found: dict[str, Any] = {}
        for key, item in value.items():
            found.update(leaves(item, (*path, str(key))))
        return found
    return {".".join(path): value}


def readme_config_block() -> str:
    text = README.read_text(encoding="utf-8")
    found = re.search(r"^## Configuration\n.*?^```yaml\n(.*?)^```", text, re.S | re.M)
    assert found, "README.md has no ```yaml block under ## Configuration"
    return found.group(1)


# --- the config block and the example ----------------------------------------------------


def test_readme_config_block_is_the_example_config_with_the_defaults() -> None:
    block = yaml.safe_load(readme_config_block())
    text = EXAMPLE.read_text(encoding="utf-8")
    example = yaml.safe_load(text)
    assert sorted(leaves(block)) == sorted(leaves(example))  # the same keys
    assert block == example  # and the same values
    # the example shows every key with its default, but for what it turns on for `make run`
    shown = leaves(Config.model_validate(example).model_dump(mode="json"))
    defaults = leaves(Config().model_dump(mode="json"))
    for key in defaults:
        name = key.rsplit(".", 1)[-1]  # a top-level list (bots) is a key of its own
        # every key is there, set or (optional ones without a default value) commented out
        assert re.search(rf"^\s*#?\s*{re.escape(name)}:", text, re.M), f"{key} is not shown"
    differs = {key for key in defaults if shown[key] != defaults[key]}
    assert differs == EXAMPLE_CHOICES, {k: (shown[k], defaults[k]) for k in differs}


def test_the_cluster_example_passes_config_check_and_the_readme_shows_its_keys() -> None:
    result = CliRunner().invoke(main, ["--json", "config", "check", str(CLUSTER_EXAMPLE)])
    assert result.exit_code == 0, result.output
    example = leaves(yaml.safe_load(CLUSTER_EXAMPLE.read_text(encoding="utf-8")))
    assert (example["idmap.backend"], example["idmap.runtime_backend"]) == ("postgres", "redis")
    text = README.read_text(encoding="utf-8")
    found = re.search(r"^## Several daemons\n.*?^```yaml\n(.*?)^```", text, re.S | re.M)
    assert found, "README.md has no ```yaml block under ## Several daemons"
    shown = leaves(yaml.safe_load(found.group(1)))
    assert {"idmap.backend", "idmap.postgres_dsn", "idmap.runtime_backend", "idmap.redis_url",
            "idmap.redis_prefix", "idmap.data_dir"} <= shown.keys()
    assert {key: example.get(key) for key in shown} == shown  # the example's own values


# --- docs/ ---------------------------------------------------------------------------------


def test_docs_index_names_each_user_doc_and_the_readme_links_it() -> None:
    index = (DOCS / "README.md").read_text(encoding="utf-8")
    for name in USER_DOCS:
        assert (DOCS / name).is_file(), name
        assert f"]({name})" in index, f"docs/README.md does not link {name}"
    assert "](docs/README.md)" in README.read_text(encoding="utf-8")


def _slug(heading: str) -> str:
    """The anchor GitHub gives a Markdown heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _markdown_files() -> list[Path]:
    return [README, ROOT / "README.zh-CN.md", DOCS / "README.md",
            *(DOCS / name for name in USER_DOCS)]


@pytest.mark.parametrize("page", _markdown_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_and_anchors_resolve(page: Path) -> None:
    text = page.read_text(encoding="utf-8")  # (a missing page fails here)
    links = re.findall(r"\]\(([^)\s]+)\)", text)
    assert any(not re.match(r"[a-z]+://", target) for target in links), f"{page.name}: no links"
    for target in links:
        if re.match(r"[a-z]+://", target):
            continue
        file, _, anchor = target.partition("#")
        linked = (page.parent / file).resolve() if file else page
        assert linked.exists(), f"{page.name}: link to {target}: no such file"
        assert ROOT in linked.parents or linked == ROOT, f"{page.name}: {target} leaves the repo"
        if anchor and linked.suffix == ".md":
            headings = re.findall(r"^#+ (.+)$", linked.read_text(encoding="utf-8"), re.M)
            assert anchor in {_slug(h) for h in headings}, f"{page.name}: no #{anchor}"


def test_readme_says_how_to_run_the_cli_after_make_run() -> None:
    text = README.read_text(encoding="utf-8")
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert "VENV   := .venv" in makefile and "$(BIN)/gensokyo-idmap" in makefile
    assert ".venv/bin/gensokyo-idmap" in text
    assert ". .venv/bin/activate" in text


# --- nothing a user reads cites the design file ------------------------------------------


def _help_texts(command: click.Command, path: list[str]) -> list[tuple[str, str]]:
    result = CliRunner().invoke(main, [*path, "--help"])
    assert result.exit_code == 0, (path, result.output)
    texts = [(" ".join(path) or "gensokyo-idmap", result.output)]
    if isinstance(command, click.Group):
        for name, sub in command.commands.items():
            texts += _help_texts(sub, [*path, name])
    return texts


def test_no_user_facing_text_cites_the_design_file() -> None:
    texts = [(str(p.relative_to(ROOT)), p.read_text(encoding="utf-8")) for p in _markdown_files()]
    texts += [(str(EXAMPLE.relative_to(ROOT)), EXAMPLE.read_text(encoding="utf-8"))]
    texts += _help_texts(main, [])
    texts += [("config schema", json.dumps(Config.model_json_schema())),
              ("openapi.json", json.dumps(openapi_document()))]
    assert len(texts) > 20  # every command's help was read
    for where, text in texts:
        assert "DESIGN" not in text, f"{where} cites DESIGN, which users do not have"
        assert "../shared" not in text, where
