"""Which Flink release wrote a savepoint: what its files tell, or what the user says.

The files tell a range. ``_metadata`` version 3 is Flink 1.13-1.15 (or flinkstate's writer,
which writes it for every release), 4 is 1.16-1.20 (it adds the ``CheckpointProperties``), 5 is
2.0 (operator names and uids) and 6 is 2.1 on. The operator state streams narrow it: format 5
is Flink 1.17 and older, 6 is 1.18 on (and flinkstate's writer). Where a state's bytes differ
between the releases left (Kryo 2 in Flink 1.x, Kryo 5 in 2.x: :mod:`..types.kryo_read`), only
the user can say which: ``read_savepoint(..., flink_version="1.15")`` (option ``flinkVersion``);
without it the read is ``[FLINK_VERSION_REQUIRED]``, never a guess.
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
#: Operator state format version: the releases that write it.
_BY_OPERATOR_FORMAT: dict[int, tuple[Release, ...]] = {
    5: tuple(r for r in RELEASES if r <= (1, 17)),
    6: tuple(r for r in RELEASES if r >= (1, 18)),
}
_VERSION = re.compile(r"\s*(\d+)\.(\d+)(?:\.\d+)?\s*")


def release_text(r: Release) -> str:
    return f"{r[0]}.{r[1]}"


@dataclass(frozen=True)
class FlinkVersions:
    """The Flink releases that can have written a savepoint (``flinkstate``: our writer can
    have too, carrying any release's bytes), and whether the user named the release."""

    releases: tuple[Release, ...]
    flinkstate: bool = False
    given: bool = False
    #: What the range is read from (for messages).
    evidence: str = ""

    def describe(self) -> str:
        """``"2.1-2.3"``, ``"1.16-1.17"``, ``"1.13-1.15 or flinkstate's writer"``."""
        parts = []
        if self.releases:
            low, high = self.releases[0], self.releases[-1]
            parts.append(release_text(low) if low == high else f"{release_text(low)}-{release_text(high)}")
        if self.flinkstate:
            parts.append("flinkstate's writer")
        return " or ".join(parts) or "no known Flink release"

    @property
    def kryo(self) -> int | None:
        """The Kryo major version of the values (2: Flink 1.x, 5: 2.x); None: the files do not tell."""
        if self.flinkstate:
            return None
        majors = {2 if r < (2, 0) else 5 for r in self.releases}
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
        releases, ours = self.releases, self.flinkstate
        for version in seen:
            releases = tuple(r for r in releases if r in _BY_OPERATOR_FORMAT.get(version, ()))
            ours = ours and version == 6  # flinkstate's writer writes format 6 only
        formats = ", ".join(str(v) for v in seen)
        return FlinkVersions(releases, ours, False, f"{self.evidence}, operator state format {formats}")


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
    if release not in found.releases and not found.flinkstate:
        raise InvalidArgumentError(
            f"{where}: flink_version {text!r} contradicts the files: {found.evidence} is written by "
            f"Flink {found.describe()}"
        )
    return FlinkVersions((release,), False, True, f"flink_version {text!r}")
