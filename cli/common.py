"""What every command shares: storage options, opening checkpoints, errors, consoles.

Output: on a terminal, rich tables and colours; off one (a file, a pipe into ``grep``),
plain lines: every record on one line, names, keys and paths whole (no wrapping at 80
columns, no ellipsis, no borders). ``TTY_COMPATIBLE=1`` (or ``0``) overrides the detection.

Errors: every failure is one line ``[CODE] message`` on stderr and a non-zero exit status
(a traceback only with ``--debug`` or ``FLINKSTATE_DEBUG=1``). Storage option values whose
keys look like credentials are replaced by ``***`` in everything printed, tracebacks too.
"""

from __future__ import annotations

import functools
import os
import re
import sys
import traceback
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import IO, Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from flinkstate.checkpoint import CheckpointError, CompletedCheckpoint, nested_options, open_checkpoint
from flinkstate.state import FlinkStateError, InvalidArgumentError

from .render import plain_lines

EXIT_OK = 0
EXIT_CHECK_FAILED = 1
"""``verify`` found a missing or corrupt file (or manifest)."""
EXIT_USAGE = 2
"""Bad command line (click's own status)."""
EXIT_ERROR = 3
"""An error: ``[CODE] message`` on stderr."""

StorageOptions = Annotated[
    list[str] | None,
    typer.Option(
        "--storage-option",
        "-o",
        metavar="KEY=VALUE",
        help="fsspec storage option, repeatable; dotted keys nest (client_kwargs.endpoint_url=...); "
        "values are JSON where they parse. Credentials are never printed.",
    ),
]
TargetOptions = Annotated[
    list[str] | None,
    typer.Option(
        "--target-option",
        metavar="KEY=VALUE",
        help="Storage option for TARGET, repeatable (default: those of SOURCE).",
    ),
]
CheckpointPath = Annotated[
    str, typer.Argument(help="A checkpoint root (its latest), a chk-<id> or savepoint directory.")
]
OperatorUid = Annotated[str, typer.Argument(help="The operator's uid.")]
CheckpointId = Annotated[
    int | None,
    typer.Option("--checkpoint-id", "-c", min=1, help="A checkpoint under a root (default: the latest)."),
]
JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON (for scripts) instead of tables.")]
FlinkVersion = Annotated[
    str | None,
    typer.Option(
        "--flink-version",
        metavar="RELEASE",
        help="The Flink release (1.13-2.3, e.g. 1.17 or 1.17.2) to write a Flink savepoint for. Default: "
        "the newest, or for a Flink 1.x savepoint the oldest release it can be from.",
    ),
]
AllowPickle = Annotated[
    bool,
    typer.Option(
        "--allow-pickle",
        help="Load pickled keys and values where counting entries needs them (a state whose files "
        "are merged: incremental checkpoints, upserts). Loading a pickle runs code: only for trusted "
        "checkpoints.",
    ),
]

MIN_SECRET = 4
_SECRET_KEY = re.compile(
    r"secret|password|passwd|token|credential|session|auth|signature|sas|(^|_)key(_id)?$", re.I
)


def storage_options(pairs: Iterable[str] | None) -> dict[str, Any]:
    """``KEY=VALUE`` texts as nested fsspec storage options."""
    items = []
    for n, pair in enumerate(pairs or (), start=1):
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            # the text is not echoed: without its '=' it may be a pasted secret
            raise InvalidArgumentError(
                f"--storage-option expects KEY=VALUE; storage option number {n} has no key",
                code="INVALID_OPTION",
            )
        items.append((key.strip(), value))
    return nested_options(items)


def secrets_of(pairs: Iterable[str] | None) -> list[str]:
    """The values of options whose keys look like credentials (``key``, ``secret``, ``token``, ...).

    Values shorter than :data:`MIN_SECRET` are left alone: replacing a one-letter test key
    would garble every message while hiding nothing.
    """
    out = []
    for pair in pairs or ():
        key, _, value = pair.partition("=")
        last = key.strip().rsplit(".", 1)[-1]
        if len(value) >= MIN_SECRET and _SECRET_KEY.search(last):
            out.append(value)
            if len(value) > 1 and value[0] == value[-1] == '"':
                out.append(value[1:-1])
    return sorted(set(out), key=len, reverse=True)


def redact(text: str, secrets: Iterable[str]) -> str:
    for secret in secrets:
        text = text.replace(secret, "***")
    return text


def load(
    path: str, options: Mapping[str, Any], checkpoint_id: int | None = None, allow_pickle: bool = False
) -> CompletedCheckpoint:
    """The checkpoint or savepoint at ``path`` (a root: its latest, or ``checkpoint_id``);
    ``allow_pickle``: pickled values may be loaded (see ``open_checkpoint``)."""
    checkpoint = open_checkpoint(path, options, checkpoint_id, allow_pickle)
    if not isinstance(checkpoint, CompletedCheckpoint):
        raise CheckpointError(
            f"{path} is a Flink savepoint: the command reads flinkstate checkpoints (read Flink "
            "savepoints with flinkstate.checkpoint.flink.read_savepoint or the Spark source)",
            code="UNSUPPORTED_FORMAT",
        )
    return checkpoint


def on_terminal(stream: IO[str]) -> bool:
    """Whether ``stream`` is a terminal (``TTY_COMPATIBLE=1``/``0`` decides when set)."""
    flag = os.environ.get("TTY_COMPATIBLE", "")
    if flag in ("0", "1"):
        return flag == "1"
    try:
        return stream.isatty()
    except ValueError:  # closed
        return False


class Out:
    """Tables and results on stdout: rich on a terminal, plain lines off one."""

    def print(self, *parts: Any) -> None:
        if on_terminal(sys.stdout):
            Console(highlight=False, soft_wrap=False).print(*parts)
            return
        for part in parts:
            for line in plain_lines(part):
                typer.echo(line)


@contextmanager
def pickle_hint() -> Iterator[None]:
    """A ``[PICKLE_NOT_ALLOWED]`` raised inside names ``--allow-pickle``."""
    try:
        yield
    except CheckpointError as exc:
        if exc.code != "PICKLE_NOT_ALLOWED":
            raise
        raise CheckpointError(
            "a state holds pickled keys or values that counting its entries must load (its files are "
            "merged), and loading a pickle runs code: pass --allow-pickle only for a trusted checkpoint",
            code="PICKLE_NOT_ALLOWED",
        ) from exc


def out_console() -> Out:
    """Tables and results (stdout)."""
    return Out()


def err_console() -> Console:
    """Progress bars and notes (stderr), so stdout stays clean for ``--json``."""
    return Console(stderr=True, highlight=False)


ProgressHook = Callable[[int, int], None]
"""What the library's long calls take as ``progress``: called with ``(done, total)``."""


@contextmanager
def counting_bars(unit: str) -> Iterator[Callable[[str], ProgressHook]]:
    """Progress bars on stderr, drawn only on a terminal (off one nothing is printed).

    Yields ``bar(description)``, which adds a bar and returns the ``progress(done, total)``
    hook that drives it (``done`` of ``total`` ``unit``, e.g. files).
    """
    console = err_console()
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn(unit),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=console, disable=not console.is_terminal) as progress:

        def bar(description: str) -> ProgressHook:
            task = progress.add_task(description, total=None)

            def advance(done: int, total: int) -> None:
                progress.update(task, completed=done, total=total)

            return advance

        yield bar


def _debug(ctx: typer.Context | None) -> bool:
    """``--debug`` on the command line (the root command's option), or ``FLINKSTATE_DEBUG=1``."""
    if ctx is not None and ctx.find_root().params.get("debug"):
        return True
    return os.environ.get("FLINKSTATE_DEBUG", "") not in ("", "0")


def error_line(exc: BaseException) -> str:
    """``[CODE] message`` for any exception."""
    if isinstance(exc, FlinkStateError):
        return str(exc)
    if isinstance(exc, PermissionError):
        return f"[ACCESS_DENIED] {exc}"
    if isinstance(exc, FileNotFoundError):
        return f"[NOT_FOUND] {exc}"
    if isinstance(exc, OSError):
        return f"[IO_ERROR] {type(exc).__name__}: {exc}"
    if type(exc).__module__.split(".")[0] in _STORAGE_MODULES:
        return f"[STORAGE_ERROR] {type(exc).__name__}: {exc}"
    return f"[UNEXPECTED] {type(exc).__name__}: {exc} (run with --debug for the traceback)"


_STORAGE_MODULES = {"botocore", "aiobotocore", "aiohttp", "s3fs", "fsspec", "gcsfs", "adlfs", "azure"}
"""Where errors of the storage stack come from (connection failures, refused requests, ...)."""

F = TypeVar("F", bound=Callable[..., Any])


def guarded(*option_params: str) -> Callable[[F], F]:
    """Run a command turning any error into one redacted ``[CODE] message`` line and exit 3.

    ``option_params``: the names of the command's storage-option parameters, whose secret
    values are redacted from everything printed. The command takes a ``ctx: typer.Context``
    (how ``--debug`` is seen).
    """

    def decorate(command: F) -> F:
        @functools.wraps(command)
        def run(*args: Any, **kwargs: Any) -> Any:
            try:
                return command(*args, **kwargs)
            except (typer.Exit, typer.Abort):
                raise
            except Exception as exc:
                secrets = [s for name in option_params for s in secrets_of(kwargs.get(name))]
                if _debug(kwargs.get("ctx")):
                    text = "".join(traceback.format_exception(exc))
                    sys.stderr.write(redact(text, secrets))
                sys.stderr.write(redact(error_line(exc), secrets).replace("\n", " ") + "\n")
                raise typer.Exit(EXIT_ERROR) from None

        return run  # type: ignore[return-value]

    return decorate
