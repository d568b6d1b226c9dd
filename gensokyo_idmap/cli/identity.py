"""``identity``: resolve, look up, show and bind identities in the graph."""

from __future__ import annotations

import asyncio
import sys

import click

from gensokyo_idmap.cli.context import CliContext, open_graph
from gensokyo_idmap.cli.output import emit
from gensokyo_idmap.identity import IdentityKey, RUin, parse_identity_input, parse_vuin
from gensokyo_idmap.reports import bind_data, rebind_data, resolution_data, vuin_data

__all__ = ["identity"]


def _identity_arg(ctx: CliContext, value: str, field: str = "KEY") -> IdentityKey:
    return parse_identity_input(value, ctx.app_id, field)


def _describe(key: IdentityKey) -> str:
    return f"{key.key} ({key.text})" if isinstance(key, RUin) else key.key


@click.group()
def identity() -> None:
    """Resolve, look up, show and bind identities in openid-map.db."""


@identity.command()
@click.argument("keys", nargs=-1, required=True)
@click.option("--scene", default=None, help="Record the first key as last seen in this scene.")
@click.pass_obj
def resolve(ctx: CliContext, keys: tuple[str, ...], scene: str | None) -> None:
    """Resolve KEYS seen together to one vUIN (allocating one if none is known)."""
    parsed = [_identity_arg(ctx, k) for k in keys]
    with open_graph(ctx) as graph:
        result = asyncio.run(graph.resolve(parsed, scene=scene))
    emit(ctx, resolution_data(result),
          lambda: f"{result.vuin}" + (" (new)" if result.created else "")
          + "".join(f"\nconflict: {k} stays on {v}" for k, v in result.conflicts))


@identity.command()
@click.argument("key")
@click.pass_obj
def lookup(ctx: CliContext, key: str) -> None:
    """Print the vUIN of KEY (exit 1 when it is unknown)."""
    parsed = _identity_arg(ctx, key)
    with open_graph(ctx, readonly=True) as graph:
        vuin = graph.lookup(parsed)
    emit(ctx, {"key": parsed.key, "vuin": vuin},
          lambda: f"{vuin}" if vuin is not None else f"{parsed.key}: not found")
    if vuin is None:
        sys.exit(1)


@identity.command()
@click.argument("vuin")
@click.pass_obj
def show(ctx: CliContext, vuin: str) -> None:
    """Show VUIN: its identities, last seen per scene, aliases."""
    number = parse_vuin(vuin, "VUIN")
    with open_graph(ctx, readonly=True) as graph:
        view = graph.show(number)
    data = vuin_data(view)

    def human() -> str:
        lines = [f"vUIN {view.vuin}" + (f" (alias {view.requested} resolves here)"
                                        if view.requested != view.vuin else "")]
        lines += [f"  identity  {key}" for key in view.identities]
        lines += [f"  seen      {scene}: {s.identity}" for scene, s in view.last_seen]
        lines += [f"  alias     {alias}" for alias in view.aliases]
        return "\n".join(lines)

    emit(ctx, data, human)


@identity.command()
@click.argument("key")
@click.argument("vuin")
@click.pass_obj
def bind(ctx: CliContext, key: str, vuin: str) -> None:
    """Bind KEY to VUIN (added to its identity set)."""
    parsed = _identity_arg(ctx, key)
    number = parse_vuin(vuin, "VUIN")
    with open_graph(ctx) as graph:
        result = asyncio.run(graph.bind(parsed, number))
    emit(ctx, bind_data(result),
          lambda: f"{result.outcome}: {_describe(parsed)} → {result.vuin} ({result.reason})")


@identity.command()
@click.argument("old")
@click.argument("new")
@click.pass_obj
def rebind(ctx: CliContext, old: str, new: str) -> None:
    """Move every identity of OLD to NEW; OLD keeps resolving to NEW."""
    old_vuin = parse_vuin(old, "OLD")
    new_vuin = parse_vuin(new, "NEW")
    with open_graph(ctx) as graph:
        result = asyncio.run(graph.rebind(old_vuin, new_vuin))
    emit(ctx, rebind_data(result),
          lambda: f"{result.outcome}: {result.old} → {result.new} ({result.reason})")
