"""Before a manifest is published: the files its version wrote are there, whole.

Tasks report the files they wrote, and the manifest records each one's size; but the
committer may not see them (a local path on a multi-host cluster: each host wrote its own
copy). So :func:`.committer.publish_manifest`, the one way every manifest is published,
first checks every file the version wrote: one in the version's directory, or one recorded
with the version's id as its origin elsewhere (a native SST file in the root's shared area,
a streaming batch's file under ``_data``). Each must be listed with exactly its recorded
size (``[COMMIT_FILES_MISSING]`` otherwise), from ONE listing (names and sizes) per
directory holding such a file, never a request per file.

Files of earlier versions in a directory listed anyway are checked too, at no cost. Those
elsewhere are not listed again: their version checked them when it committed, retention
keeps what the latest version references, and a :class:`~.pending.PendingCheckpoint`
checks by name that the files of earlier checkpoints it references still exist
(:func:`.inflight.refuse_unsound`, which leaves the directories listed here to this check).
"""

from __future__ import annotations

import posixpath

from ..errors import CommitFilesMissingError
from ..fileref import FileRef
from ..manifest import Manifest
from ..storage import Storage

SHOWN = 5
"""How many of the files missing or not whole a message names."""


def _split(ref: FileRef) -> tuple[str, str]:
    """(directory, name) of ``ref``'s file, the directory relative to the version's."""
    parent, name = posixpath.split(posixpath.normpath(ref.path))
    return parent, name


def wrote(manifest: Manifest, ref: FileRef) -> bool:
    """Whether ``manifest``'s version wrote ``ref``'s file: its recorded origin is the version,
    or it lies in the version's directory."""
    parent = _split(ref)[0]
    return ref.checkpoint_id == manifest.checkpoint_id or not (parent == ".." or parent.startswith("../"))


def written_directories(manifest: Manifest) -> set[str]:
    """The directories (relative to the version's) holding a file ``manifest``'s version wrote:
    what :func:`check_written` lists."""
    return {_split(ref)[0] for ref in manifest.files() if wrote(manifest, ref)}


def check_written(directory: Storage, manifest: Manifest) -> None:
    """Raise ``[COMMIT_FILES_MISSING]`` unless every file ``manifest`` (to be published in
    ``directory``) references in :func:`written_directories` is there with its recorded size."""
    listed = {parent: directory.file_sizes(parent) for parent in sorted(written_directories(manifest))}
    bad: dict[str, str] = {}
    for ref in manifest.files():
        parent, name = _split(ref)
        if parent not in listed or ref.path in bad:
            continue
        size = listed[parent].get(name)
        if size is None:
            bad[ref.path] = f"{ref.path} (missing)"
        elif size != ref.size:
            bad[ref.path] = f"{ref.path} ({size} bytes, {ref.size} recorded)"
    if not bad:
        return
    more = f" and {len(bad) - SHOWN} more" if len(bad) > SHOWN else ""
    shown = ", ".join(list(bad.values())[:SHOWN]) + more
    raise CommitFilesMissingError(
        f"checkpoint {manifest.checkpoint_id} is not published: {len(bad)} file(s) it references are "
        f"not there whole, as seen from {directory.safe_url}: {shown}. Its tasks wrote to a filesystem "
        "the committer does not see (a local path on a multi-host cluster: each host keeps its own "
        "copy), or the files changed before the commit; this attempt's files are deleted and the "
        "previous checkpoint stays as it was"
    )
