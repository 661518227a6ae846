"""Hostile bytes: mutations of real snapshot files, and the read paths a user takes over them,
each run bounded in time and memory.

A mutation changes one file of a copied snapshot (:func:`mutate`): ``truncate`` cuts it,
``bitflip`` flips one to three bits, ``splice`` copies a slice of the file over another place,
``inflate`` sets a 4-byte word to ``0x7fffffff`` or ``0xffffffff`` (a length field saying
2^31). :func:`run_bounded` runs one read under an interval timer: the outcome is success, our
error hierarchy, or a finding (any other exception, a read past its time; ``MemoryError`` once
:func:`cap_memory` caps the process). Shared by the
mutation tests (``tests/checkpoint/flink/test_hostile_bytes.py``,
``tests/checkpoint/reading/test_hostile_checkpoint.py``) and the longer hunt
(``tests/support/hunt.py``, ``make fuzz``).
"""

from __future__ import annotations

import random
import resource
import shutil
import signal
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

from flinkstate.checkpoint import CompletedCheckpoint, open_checkpoint
from flinkstate.checkpoint.flink import read_savepoint
from flinkstate.checkpoint.flink.reader.savepoint import PYTHON_PREFIX
from flinkstate.state.errors import FlinkStateError

KINDS = ("truncate", "bitflip", "splice", "inflate")
"""The kinds of mutation."""

TIME_LIMIT_S = 10.0
"""A read of a mutated fixture taking longer than this is a hang (a clean one takes < 0.5 s)."""

MEMORY_CAP = 512 << 20
"""How much a hunting process's memory may grow past its clean reads: a length field of 2^31
must be refused, not allocated (:func:`cap_memory`)."""


class ReadTimeout(BaseException):
    """A bounded read ran past its time (a BaseException: no ``except Exception`` hides it)."""


def mutate(data: bytes, kind: str, rng: random.Random) -> bytes:
    """``data`` changed by one mutation of ``kind`` (never equal to ``data`` when it is not empty)."""
    n = len(data)
    if n == 0:
        return data
    if kind == "truncate":
        return data[: rng.randrange(n)]
    out = bytearray(data)
    if kind == "bitflip":
        for _ in range(rng.randint(1, 3)):
            at = rng.randrange(n)
            out[at] ^= 1 << rng.randrange(8)
    elif kind == "splice":
        size = rng.randint(1, min(64, n))
        src, dst = rng.randrange(n - size + 1), rng.randrange(n - size + 1)
        out[dst : dst + size] = data[src : src + size]
        if out == data:  # the slice landed on equal bytes: flip one instead
            out[dst] ^= 0xFF
    elif kind == "inflate":
        at = rng.randrange(max(1, n - 3))
        word = rng.choice((b"\x7f\xff\xff\xff", b"\xff\xff\xff\xff"))
        out[at : at + 4] = word
        if out == data:
            out[at] ^= 0x80
    else:
        raise ValueError(f"unknown mutation kind {kind!r}")
    return bytes(out)


@dataclass(frozen=True)
class Finding:
    """A read of a mutated file that did not end in success or one of our errors."""

    reader: str
    file: str
    kind: str
    seed: int
    what: str

    def __str__(self) -> str:
        return f"{self.reader}: {self.kind} of {self.file} (seed {self.seed}): {self.what}"


@dataclass
class Tally:
    """Counts of mutations and reads per reader and outcome, and the findings."""

    mutations: Counter[str] = field(default_factory=Counter)
    reads: Counter[str] = field(default_factory=Counter)
    findings: list[Finding] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {
            "mutations": dict(self.mutations),
            "reads": dict(self.reads),
            "findings": [str(f) for f in self.findings],
        }

    def report(self) -> str:
        """The counts as two tables (mutations per file format and kind; reads per reader and
        outcome), then each finding."""
        lines = ["mutations (file format:kind)"]
        lines += [f"  {k:<28} {n:>6}" for k, n in sorted(self.mutations.items())]
        lines.append(f"reads {'reader':<22} {'ok':>6} {'typed':>6} {'finding':>7}")
        for reader in sorted({k.rsplit(":", 1)[0] for k in self.reads} | {f.reader for f in self.findings}):
            bad = sum(1 for f in self.findings if f.reader == reader)
            ok, typed = self.reads[f"{reader}:ok"], self.reads[f"{reader}:typed"]
            lines.append(f"  {reader:<26} {ok:>6} {typed:>6} {bad:>7}")
        lines.extend(str(f) for f in self.findings)
        return "\n".join(lines)


def _on_alarm(signum: int, frame: FrameType | None) -> None:
    raise ReadTimeout()


@contextmanager
def _alarm(seconds: float) -> Iterator[None]:
    previous = signal.signal(signal.SIGALRM, _on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def run_bounded(read: Callable[[], object]) -> tuple[str, object]:
    """Run ``read``: ``("ok", what it returned)``, ``("typed", None)`` when it raised our error,
    else (what went wrong, None): an exception of another type (``MemoryError`` past
    :func:`cap_memory`'s cap too) or no result within :data:`TIME_LIMIT_S`."""
    try:
        with _alarm(TIME_LIMIT_S):
            return "ok", read()
    except ReadTimeout:
        return f"no result after {TIME_LIMIT_S} s", None
    except FlinkStateError:
        return "typed", None
    except MemoryError:
        return "MemoryError: an allocation beyond the memory cap", None
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"[:300], None


def cap_memory(extra: int) -> None:
    """Let this process's data segment (heap and private mappings: RLIMIT_DATA) grow by at most
    ``extra`` bytes from now on: a larger allocation raises ``MemoryError``."""
    used = next(
        int(line.split()[1]) * 1024
        for line in Path("/proc/self/status").read_text().splitlines()
        if line.startswith("VmData:")
    )
    resource.setrlimit(resource.RLIMIT_DATA, (used + extra, resource.getrlimit(resource.RLIMIT_DATA)[1]))


@dataclass(frozen=True)
class Read:
    """One read of a user's path: ``reader`` names what it decodes, ``label`` which state,
    ``run`` returns what it read (None where nothing is compared)."""

    reader: str
    label: str
    run: Callable[[], object]


Reads = Iterator[Read]


def flink_reads(path: str, types: dict[str, Any], only: set[str] | None = None) -> Reads:
    """Everything a user reads from the Flink savepoint at ``path``: the ``_metadata`` and the
    releases it tells, then each operator's (each in ``only``, operator ids, when given) keyed
    states (declared PyFlink states by their Python name), timers, operator states and a
    restored backend. Opening runs first; a read yielded later is only run once it succeeded."""
    opened: list[Any] = []

    def open_() -> object:
        sp = read_savepoint(path, types=types)
        opened.append(sp)
        return sp.metadata_table()

    yield Read("metadata", "metadata", open_)
    if not opened:
        return
    sp = opened[0]
    native = any(s.managed_keyed and s.managed_keyed.kind == "incremental" for s in _subtasks(sp))
    for op in sp.operators:
        if only is not None and op.operator_id not in only:
            continue
        ref = op.uid or op.operator_id
        headers: list[Any] = []
        yield Read("keyed header", ref, lambda r=ref, h=headers: h.append(sp.keyed_header(r)))
        header = headers[0] if headers else None
        for s in header.states if header is not None else ():
            name = s.name
            if s.is_timer:
                yield Read(
                    "timers", f"{ref}/{name}", lambda r=ref, n=name: _timer_rows(sp.decode_timers(r, n))
                )
                continue
            if name.startswith(PYTHON_PREFIX) and name[len(PYTHON_PREFIX) :] in types:
                name = name[len(PYTHON_PREFIX) :]
            reader = "keyed native" if native else "keyed stream"
            yield Read(reader, f"{ref}/{name}", lambda r=ref, n=name: sp.keyed_state(r, n))
        if header is not None:
            yield Read("restore", f"{ref}/restore", lambda r=ref: sp.keyed_backend(r, 0, 1).close())
        infos: list[Any] = []
        yield Read("operator header", ref, lambda r=ref, i=infos: i.extend(sp.operator_infos(r)))
        for info in infos:
            yield Read(
                "operator state",
                f"{ref}/{info.name}",
                lambda r=ref, n=info.name: sp.operator_state(r, n),
            )


def _subtasks(sp: Any) -> list[Any]:
    return [s for o in sp.operators for s in o.subtasks]


def _timer_rows(parts: list[Any]) -> list[str]:
    return sorted(
        repr(t)
        for rows in parts
        for t in zip(rows.key_group, rows.key, rows.namespace, rows.value, strict=True)
    )


def checkpoint_reads(path: str) -> Reads:
    """Everything a user reads from one of our checkpoints at ``path``: opening (the manifest),
    then each operator's keyed states, a restored backend and its operator states."""
    opened: list[CompletedCheckpoint] = []

    def open_() -> object:
        cp = open_checkpoint(path)
        assert isinstance(cp, CompletedCheckpoint)
        opened.append(cp)
        return cp.manifest

    yield Read("manifest", "manifest", open_)
    if not opened:
        return
    cp = opened[0]
    for op in cp.manifest.operators:
        for meta in op.keyed_states:

            def keyed(uid: str = op.uid, state: str = meta.name) -> object:
                return [(kg, list(tables)) for kg, tables in cp.read_keyed(uid, state)]

            yield Read("keyed files", f"{op.uid}/{meta.name}", keyed)
        if op.keyed_states:
            yield Read("restore", f"{op.uid}/restore", lambda u=op.uid: cp.keyed_backend(u, 0, 1).close())
        if op.operator_states:
            yield Read("operator files", f"{op.uid}/operator", lambda u=op.uid: cp.operator_states(u))


@dataclass(frozen=True)
class Subject:
    """A snapshot to mutate: ``formats`` its files (relative name -> what it holds) and ``reads``
    the reads that meet a mutation of one of them (``reads(directory, name)``)."""

    name: str
    source: Path
    formats: dict[str, str]
    reads: Callable[[str, str], Reads]
    exact: frozenset[str] = frozenset()
    """The formats whose bytes are checksummed: a read that succeeds after they are mutated
    must return what the clean read returns."""


def flink_subject(name: str, source: Path, types: dict[str, Any]) -> Subject:
    """A Flink savepoint: a mutated ``_metadata`` meets every read, another file the reads of the
    operator whose handle names it."""
    sp = read_savepoint(str(source), types=types)
    owners: dict[str, str] = {}
    formats = {"_metadata": "_metadata"}
    for op in sp.meta.operators:
        for sub in op.subtasks:
            keyed, operator = sub.managed_keyed, sub.managed_operator
            named = [("keyed stream", keyed.stream if keyed else None)]
            named.append(("operator stream", operator.stream if operator else None))
            named += [(_rocksdb_format(local), h) for local, h in (keyed.files if keyed else ())]
            for fmt, handle in named:
                if handle is not None and handle.data is None:
                    base = handle.name.rsplit("/", 1)[-1]
                    owners[base], formats[base] = op.operator_id, fmt
    missing = {p.name for p in source.iterdir()} - set(formats)
    assert not missing, f"{source}: files no handle names: {sorted(missing)}"

    def reads(directory: str, mutated: str) -> Reads:
        only = None if mutated == "_metadata" else {owners[mutated]}
        return flink_reads(directory, types, only)

    return Subject(name, source, formats, reads, frozenset({"sst", "MANIFEST"}))


def _rocksdb_format(local: str) -> str:
    if local.endswith(".sst"):
        return "sst"
    return "MANIFEST" if local.startswith("MANIFEST") else "rocksdb other"


def checkpoint_subject(name: str, source: Path) -> Subject:
    """One of our checkpoints (a ``chk-<id>`` directory or savepoint): every mutation meets every read."""
    formats = {
        str(p.relative_to(source)): "manifest" if p.name == "_metadata" else p.suffix.lstrip(".") or "data"
        for p in source.rglob("*")
        if p.is_file()
    }
    return Subject(
        name,
        source,
        formats,
        lambda directory, mutated: checkpoint_reads(directory),
        frozenset(formats.values()),
    )


def hunt(subject: Subject, work: Path, count: int, seed: int, tally: Tally) -> None:
    """Copy the subject to ``work`` once, then ``count`` times: mutate one file (``_metadata``
    or the manifest a third of the time, else any other), run the reads that meet it, each
    bounded, and put the file back. A successful read of a checksummed format must return what
    the clean read did."""
    shutil.copytree(subject.source, work)
    clean = {r.label: run_bounded(r.run) for r in subject.reads(str(work), "_metadata")}
    meta = "_metadata"
    others = sorted(n for n in subject.formats if n != meta)
    rng = random.Random(seed)
    for _ in range(count):
        case_seed = rng.randrange(1 << 32)
        case = random.Random(case_seed)
        name = meta if not others or case.random() < 1 / 3 else case.choice(others)
        kind = case.choice(KINDS)
        target = work / name
        original = target.read_bytes()
        target.write_bytes(mutate(original, kind, case))
        fmt = subject.formats[name]
        tally.mutations[f"{fmt}:{kind}"] += 1
        try:
            for read in subject.reads(str(work), name):
                outcome, value = run_bounded(read.run)
                if outcome == "ok" and fmt in subject.exact and (outcome, value) != clean.get(read.label):
                    outcome = f"{read.label}: a wrong value, returned quietly"
                if outcome in ("ok", "typed"):
                    tally.reads[f"{read.reader}:{outcome}"] += 1
                else:
                    tally.findings.append(
                        Finding(read.reader, f"{subject.name}/{name}", kind, case_seed, outcome)
                    )
        finally:
            target.write_bytes(original)
