"""The command needs typer and rich: imported first by the package, so without them the
command fails with one :class:`~flinkstate.state.errors.MissingExtraError` naming the extra
to install."""

from flinkstate.state.extras import require

for _module in ("typer", "rich"):
    require(_module, "the flinkstate command")
