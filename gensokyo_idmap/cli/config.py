"""``config``: check a config file; convert an old Go Gensokyo config.yml. ``init``: write
the example config to start from."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from gensokyo_idmap.cli.context import CliContext
from gensokyo_idmap.cli.output import emit
from gensokyo_idmap.config import Config, load_config
from gensokyo_idmap.errors import BadInputError

__all__ = ["config_group", "init_command"]


@click.group("config")
def config_group() -> None:
    """Check a config file; convert an old Go Gensokyo config.yml."""


@config_group.command("check")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--connect", is_flag=True,
              help="Also reach the PostgreSQL and Redis the file configures (exit 1 if one "
                   "cannot be used).")
@click.pass_obj
def config_check(ctx: CliContext, file: Path, connect: bool) -> None:
    """Validate FILE (with GSK_<SECTION>__<KEY> overrides) without starting anything."""
    import os

    from gensokyo_idmap.config_env import env_overrides
    from gensokyo_idmap.ops.config_check import refuse_bad_startup, summary
    from gensokyo_idmap.ops.connect_check import reach_servers

    config = load_config(file)
    checked = refuse_bad_startup(config)
    for warning in checked.warnings:
        click.echo(f"warning: {warning}", err=True)
    overrides = [o.var for o in env_overrides(os.environ)]
    line = summary(config)
    servers = reach_servers(config) if connect else []
    ok = all(server.ok for server in servers)
    emit(ctx, {"ok": ok, "file": str(file), "summary": line,
                "warnings": list(checked.warnings), "env_overrides": overrides,
                "servers": [server.to_json() for server in servers]},
          lambda: "\n".join([f"{'ok' if ok else 'error'}: {file}: {line}"
                             + (f" ({len(overrides)} set by GSK_* variables)"
                                if overrides else ""),
                             *(f"  {server.line()}" for server in servers)]))
    if not ok:
        sys.exit(1)


@config_group.command("import-gensokyo")
@click.argument("files", metavar="FILE...", nargs=-1, required=True,
                type=click.Path(dir_okay=False, path_type=Path))
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write the new config here (secrets included, mode 0600).")
@click.option("--force", is_flag=True, help="Replace an existing --out file.")
@click.pass_obj
def config_import_gensokyo(ctx: CliContext, files: tuple[Path, ...], out: Path | None,
                           force: bool) -> None:
    """Convert an old Go Gensokyo config.yml FILE into this daemon's config; several FILEs
    (one bot each) into one config serving them all (a bots list).

    Without --out the result is printed with secrets hidden. Old keys without an
    equivalent are listed.
    """
    import os

    import yaml
    from pydantic import ValidationError

    from gensokyo_idmap.config import first_problem
    from gensokyo_idmap.ops.gensokyo_config import convert_gensokyo, masked
    from gensokyo_idmap.ops.gensokyo_merge import merge_gensokyo

    converted = []
    for file in files:
        try:
            old = yaml.safe_load(file.read_text(encoding="utf-8"))
        except OSError as exc:
            raise BadInputError("FILE", str(file), f"cannot read: {exc.strerror}") from None
        except (UnicodeDecodeError, yaml.YAMLError):
            raise BadInputError("FILE", str(file), "not a UTF-8 YAML file") from None
        try:
            converted.append((file.name, convert_gensokyo(old)))
        except BadInputError as err:
            raise BadInputError(err.field, err.value, f"{err.reason} ({file})") from None
    result = merge_gensokyo(converted)
    sources = ", ".join(str(file) for file in files)
    try:
        Config.model_validate(result.config)
    except ValidationError as exc:
        problem = first_problem(exc)
        raise BadInputError(problem.where, problem.shown,
                            f"{problem.reason} (converted from {sources})") from None
    if out is not None and out.exists() and not force:
        raise BadInputError("--out", str(out), "exists already (--force replaces it)")
    names = ", ".join(file.name for file in files)
    header = (f"# gensokyo-idmap config, converted from the Go Gensokyo config {names}.\n"
              "# Every key and its default: `gensokyo-idmap init` writes them.\n")
    shown = masked(result.config)
    if out is not None:
        text = header + yaml.safe_dump(result.config, sort_keys=False, allow_unicode=True)
        fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)

    def report() -> str:
        lines = [f"wrote {out}" if out is not None else
                 "# secrets are shown as <hidden>: use --out FILE to write them"]
        lines += [f"note: {note}" for note in result.notes]
        lines += [f"no equivalent: {key}: {why}" for key, why in result.unmapped]
        return "\n".join(lines)

    if ctx.as_json:
        click.echo(json.dumps({**result.to_json(shown), "out": str(out) if out else None},
                              ensure_ascii=False))
    elif out is not None:
        click.echo(report())
    else:
        click.echo(header + yaml.safe_dump(shown, sort_keys=False, allow_unicode=True), nl=False)
        click.echo(report(), err=True)


@click.command("init")
@click.argument("directory", required=False, default=Path("."),
                type=click.Path(file_okay=False, path_type=Path))
@click.option("--force", is_flag=True, help="Replace an existing config.yml.")
@click.pass_obj
def init_command(ctx: CliContext, directory: Path, force: bool) -> None:
    """Write a commented config.yml, every key with its default, into DIRECTORY (default:
    here) and say what to fill in."""
    from gensokyo_idmap.config_example import TO_FILL_IN, write_example

    written = write_example(directory, force=force)
    width = max(len(key) for key, _ in TO_FILL_IN)
    emit(ctx, {"file": str(written), "fill_in": [key for key, _ in TO_FILL_IN]},
         lambda: "\n".join([f"wrote {written}", "fill in:",
                            *(f"  {key:<{width}}  {why}" for key, why in TO_FILL_IN),
                            f"then: gensokyo-idmap config check {written}",
                            f"      gensokyo-idmap serve --config {written}"]))
