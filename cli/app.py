"""The ``flinkstate`` command: look into checkpoints and savepoints from a shell, no Spark needed.

Every command takes a local path or any fsspec URL (``s3://bucket/path``, ``memory://...``)
with ``--storage-option KEY=VALUE``. Exit status: 0 success, 1 ``verify`` found a missing or
corrupt file (or ``diff`` found differences), 2 bad usage, 3 an error (``[CODE] message`` on stderr).
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import Annotated

import typer

from . import catalog, convert, diff, edit, maintain, show, skew, verify

app = typer.Typer(
    name="flinkstate",
    help="Inspect, verify and rewrite flinkstate checkpoints and savepoints on any fsspec filesystem.",
    epilog="Example: flinkstate list s3://bucket/job/checkpoints -o client_kwargs.endpoint_url=http://...",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        try:
            typer.echo(f"flinkstate {version('flinkstate')}")
        except PackageNotFoundError:
            typer.echo("flinkstate (not installed)")
        raise typer.Exit()


@app.callback()
def root(
    debug: Annotated[
        bool, typer.Option("--debug", help="Print the traceback of an error (also FLINKSTATE_DEBUG=1).")
    ] = False,
    show_version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version.")
    ] = False,
) -> None:
    """Inspect, verify and rewrite flinkstate checkpoints and savepoints on any fsspec filesystem."""


app.command("list", epilog=catalog.LIST_EXAMPLE)(catalog.list_checkpoints)
app.command("inspect", epilog=catalog.INSPECT_EXAMPLE)(catalog.inspect)
app.command("show", epilog=show.EXAMPLE)(show.show)
app.command("skew", epilog=skew.EXAMPLE)(skew.skew)
app.command("verify", epilog=verify.EXAMPLE)(verify.verify)
app.command("diff", epilog=diff.EXAMPLE)(diff.diff)
app.command("rescale", epilog=maintain.RESCALE_EXAMPLE)(maintain.rescale)
app.command("gc", epilog=maintain.GC_EXAMPLE)(maintain.gc)
app.command("rollback", epilog=maintain.ROLLBACK_EXAMPLE)(maintain.rollback_root)
app.command("convert", epilog=convert.CONVERT_EXAMPLE)(convert.convert)
app.command("edit", epilog=edit.EDIT_EXAMPLE)(edit.edit)


def main() -> None:
    """The console script."""
    app()
