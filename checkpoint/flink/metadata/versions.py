"""Which Flink release wrote a savepoint: what its files tell, or what the user says.

The files tell a range. ``_metadata`` version 3 is Flink 1.13-1.15 (or flinkstate's writer,
which writes it for every release), 4 is 1.16-1.20 (it adds the ``CheckpointProperties``), 5 is
2.0 (operator names and uids) and 6 is 2.1 on. The operator state streams narrow it: format 5
is Flink 1.17 and older, 6 is 1.18 on (and flinkstate's writer). Where a state's bytes differ
between the releases left (Kryo 2 in Flink 1.x, Kryo 5 in 2.x: :mod:`..types.kryo_read`), only
the user can say which: ``read_savepoint(..., flink_version="1.15")`` (option ``flinkVersion``);
without it the read is ``[FLINK_VERSION_REQUIRED]``, never a guess.

The other way, :class:`FlinkTarget` is the release the savepoint writer writes for and what its
bytes are by it: operator state format 5 up to 1.17 (1.13-1.17 refuse 6), 6 from 1.18; Row
serializer snapshots of outer version 3 for 1.13 (which refuses 4), 4 from 1.14 (as 1.17, 1.20 and
2.3 write them); Kryo 2's bytes for 1.x, Kryo 5's for 2.x. Everything else the writer writes is
the same for every release (``_metadata`` version 3, keyed state format 6, the other serializer
snapshot versions: as Flink 1.17, 1.20 and 2.3 write them).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from flinkstate.state.errors import InvalidArgumentError

from ..errors import FlinkVersionRequiredError

Release = tuple[int, int]
RELEASES: tuple[Release, ...] = (
    (1, 13), (1, 14), (1, 15), (1, 16), (1, 17), (1, 18), (1, 19), (1, 20), (2, 0), (2, 1), (2, 2), (2, 3),
)  # fmt: skip
"""The Flink releases whose savepoints are read (oldest first)."""

_BY_METADATA: dict[int, tuple[Release, ...]] = {
    3: tuple(r for r in RELEASES if r <= (1, 15)),
    4: tuple(r for r in RELEASES if (1, 16) <= r <= (1, 20)),
    5: ((2, 0),),
    6: tuple(r for r in RELEASES if r >= (2, 1)),
}
#: Operator state format version: the releases that write it (and that flinkstate's writer
#: writes it for: :class:`FlinkTarget`).
_BY_OPERATOR_FORMAT: dict[int, tuple[Release, ...]] = {
    5: tuple(r for r in RELEASES if r <= (1, 17)),
    6: tuple(r for r in RELEASES if r >= (1, 18)),
}
_VERSION = re.compile(r"\s*(\d+)\.(\d+)(?:\.\d+)?\s*")


def release_text(r: Release) -> str:
    return f"{r[0]}.{r[1]}"


def _span(releases: tuple[Release, ...]) -> str:
    low, high = releases[0], releases[-1]
    return release_text(low) if low == high else f"{release_text(low)}-{release_text(high)}"


@dataclass(frozen=True)
class FlinkVersions:
    """The Flink releases that can have written a savepoint (``flinkstate``: our writer can
    have too, for one of the releases ``written_for``, carrying any release's bytes), and
    whether the user named the release."""

    releases: tuple[Release, ...]
    flinkstate: bool = False
    given: bool = False
    #: What the range is read from (for messages).
    evidence: str = ""
    #: With ``flinkstate``: the releases our writer can have written the savepoint for.
    written_for: tuple[Release, ...] = RELEASES

    def describe(self) -> str:
        """``"2.1-2.3"``, ``"1.16-1.17"``, ``"1.13-1.15 or flinkstate's writer for 1.13-1.17"``."""
        parts = []
        if self.releases:
            parts.append(_span(self.releases))
        if self.flinkstate:
            ours = "" if self.written_for == RELEASES else f" for {_span(self.written_for)}"
            parts.append(f"flinkstate's writer{ours}")
        return " or ".join(parts) or "no known Flink release"

    @property
    def kryo(self) -> int | None:
        """The Kryo major version of the values (2: Flink 1.x, 5: 2.x); None: the files do not tell."""
        possible = self.releases + (self.written_for if self.flinkstate else ())
        majors = {2 if r < (2, 0) else 5 for r in possible}
        return majors.pop() if len(majors) == 1 else None

    def require_kryo(self, what: str) -> int:
        """:attr:`kryo`, or ``[FLINK_VERSION_REQUIRED]`` naming ``what`` needs it."""
        kryo = self.kryo
        if kryo is None:
            raise FlinkVersionRequiredError(
                f"{what}: Kryo values are written differently by Flink 1.x (Kryo 2) and 2.x (Kryo 5), and "
                f"this savepoint can be from {self.describe()} ({self.evidence}): say which Flink wrote it "
                "with read_savepoint(..., flink_version='1.15') (option flinkVersion)"
            )
        return kryo

    def narrowed(self, operator_formats: Iterable[int]) -> FlinkVersions:
        """The range left by the operator state streams' format versions."""
        seen = sorted(set(operator_formats))
        if not seen or self.given:
            return self
        releases, ours = self.releases, self.written_for if self.flinkstate else ()
        for version in seen:  # our writer writes each format for the releases that write it
            releases = tuple(r for r in releases if r in _BY_OPERATOR_FORMAT.get(version, ()))
            ours = tuple(r for r in ours if r in _BY_OPERATOR_FORMAT.get(version, ()))
        formats = ", ".join(str(v) for v in seen)
        evidence = f"{self.evidence}, operator state format {formats}"
        return FlinkVersions(releases, bool(ours), False, evidence, ours or RELEASES)


def at_least(found: FlinkVersions, oldest: Release, why: str) -> FlinkVersions:
    """The range left of ``found`` by evidence (``why``) that only ``oldest`` on writes it."""
    if found.given:
        return found
    releases = tuple(r for r in found.releases if r >= oldest)
    ours = tuple(r for r in (found.written_for if found.flinkstate else ()) if r >= oldest)
    if not releases and not ours:
        return found
    return FlinkVersions(releases, bool(ours), False, f"{found.evidence}, {why}", ours or RELEASES)


def from_files(metadata_version: int) -> FlinkVersions:
    """The releases that write ``_metadata`` of ``metadata_version``."""
    return FlinkVersions(
        _BY_METADATA.get(metadata_version, ()),
        flinkstate=metadata_version == 3,
        evidence=f"_metadata version {metadata_version}",
    )


def parse_release(text: str) -> Release:
    """``"1.17"`` or ``"1.17.2"`` as (1, 17); a release this reader does not know is refused."""
    m = _VERSION.fullmatch(str(text))
    release = (int(m.group(1)), int(m.group(2))) if m else None
    if release not in RELEASES:
        known = f"{release_text(RELEASES[0])}-{release_text((1, 20))} and {release_text((2, 0))}-"
        raise InvalidArgumentError(
            f"flink_version {text!r} is not a Flink release read here ({known}{release_text(RELEASES[-1])})"
        )
    assert release is not None
    return release


def given(text: str, found: FlinkVersions, where: str) -> FlinkVersions:
    """The release the user named, checked against what the files allow (``found``)."""
    release = parse_release(text)
    if release not in found.releases and not (found.flinkstate and release in found.written_for):
        raise InvalidArgumentError(
            f"{where}: flink_version {text!r} contradicts the files: {found.evidence} is written by "
            f"Flink {found.describe()}"
        )
    return FlinkVersions((release,), False, True, f"flink_version {text!r}")


@dataclass(frozen=True)
class FlinkTarget:
    """The Flink release a savepoint is written for (default: the newest), and the format
    versions that release restores."""

    release: Release = RELEASES[-1]

    @staticmethod
    def of(flink_version: str | None, default: Release | None = None) -> FlinkTarget:
        """The release ``flink_version`` names (``"1.17"``, ``"1.17.2"``); None: ``default``, else
        the newest."""
        if flink_version is not None:
            return FlinkTarget(parse_release(flink_version))
        return FlinkTarget(default or RELEASES[-1])

    def describe(self) -> str:
        return f"Flink {release_text(self.release)}"

    @property
    def operator_format(self) -> int:
        """``OperatorBackendSerializationProxy``'s version: 6 (a compression flag) from 1.18."""
        return 5 if self.release <= (1, 17) else 6

    @property
    def row_outer_version(self) -> int:
        """The Row serializer snapshot's outer version: 4 (a row-kind flag) from 1.14."""
        return 3 if self.release < (1, 14) else 4

    @property
    def kryo(self) -> int:
        """The Kryo major version of Kryo values: 2 (Flink 1.x) or 5 (2.x)."""
        return 2 if self.release < (2, 0) else 5

    @property
    def pyflink_thread_mode(self) -> bool:
        """Whether PyFlink's thread execution mode restores keyed Python state (1.16 on)."""
        return self.release >= (1, 16)


def default_release(found: FlinkVersions) -> Release | None:
    """The release a savepoint carried from a Flink savepoint (``found``: the releases that can
    have written it) is written for when none is named: for Flink 1.x (or flinkstate's writer for
    1.x), the oldest release of that range, which every release of the range restores; None
    (the newest) otherwise."""
    possible = found.releases or (found.written_for if found.flinkstate else ())
    if possible and possible[-1] < (2, 0):
        return possible[0]
    return None
