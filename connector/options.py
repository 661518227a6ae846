"""Data source options, parsed once into frozen objects.

Spark hands options over lower-cased, every value a string. Unknown options are an
error that lists the valid ones; ``fs.``-prefixed options become fsspec storage options
(``fs.key``, ``fs.client_kwargs.endpoint_url`` -> ``{"key": ..., "client_kwargs":
{"endpoint_url": ...}}``) and are never echoed in messages.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from flinkstate.checkpoint import nested_options, parse_id_set, parse_json_keys
from flinkstate.state import FlinkStateError

from .errors import OptionError

READ_OPTIONS = (
    "path", "checkpointid", "operator", "state", "flatten", "includeexpired", "allowpickle",
    "keygroupsperpartition", "watermark", "keys", "keygroups", "subtasks", "timers",
    "readchangefeed", "changestartcheckpointid", "changeendcheckpointid", "valuetype", "userkeytype",
    "statetype", "types", "flinkversion",
)  # fmt: skip
DECLARING = ("valuetype", "userkeytype", "statetype", "types")
WRITE_OPTIONS = (
    "path", "operator", "state", "statetype", "keycolumns", "valuecolumns", "maxparallelism",
    "parallelism", "opcolumn", "positioncolumn", "namespacecolumn", "userkeycolumn", "ttl", "retain",
    "format", "flinkkeytype", "flinkvaluetype", "flinkuserkeytype", "sharedfilesystem", "flinkversion",
)  # fmt: skip
WRITE_FORMATS = ("flinkstate", "flink")
FLINK_TYPES = ("flinkkeytype", "flinkvaluetype", "flinkuserkeytype")
STATE_TYPES = ("value", "list", "map", "split", "union", "broadcast")
_CANONICAL = {
    "checkpointid": "checkpointId", "includeexpired": "includeExpired", "allowpickle": "allowPickle",
    "keygroupsperpartition": "keyGroupsPerPartition", "statetype": "stateType", "keycolumns": "keyColumns",
    "valuecolumns": "valueColumns", "maxparallelism": "maxParallelism", "opcolumn": "opColumn",
    "positioncolumn": "positionColumn", "namespacecolumn": "namespaceColumn",
    "userkeycolumn": "userKeyColumn", "keygroups": "keyGroups", "readchangefeed": "readChangeFeed",
    "changestartcheckpointid": "changeStartCheckpointId", "changeendcheckpointid": "changeEndCheckpointId",
    "valuetype": "valueType", "userkeytype": "userKeyType", "flinkkeytype": "flinkKeyType",
    "flinkvaluetype": "flinkValueType", "flinkuserkeytype": "flinkUserKeyType",
    "sharedfilesystem": "sharedFilesystem", "flinkversion": "flinkVersion",
}  # fmt: skip


def _name(key: str) -> str:
    return _CANONICAL.get(key, key)


def storage_options(options: Mapping[str, str]) -> dict[str, Any]:
    """fsspec storage options from ``fs.``-prefixed options (dots nest, JSON values parsed)."""
    try:
        return nested_options((k[3:], v) for k, v in options.items() if k.lower().startswith("fs."))
    except FlinkStateError as exc:
        raise OptionError(f"{exc.detail} (an fs.* option)") from exc


SPARK_OWN = frozenset({"checkpointlocation"})
"""Options Spark itself sets on a streaming sink; not ours to check."""


def _check_known(options: Mapping[str, str], valid: tuple[str, ...], what: str) -> dict[str, str]:
    lowered = {k.lower(): v for k, v in options.items()}
    plain = {k: v for k, v in lowered.items() if not k.startswith("fs.") and k not in SPARK_OWN}
    unknown = sorted(k for k in plain if k not in valid)
    if unknown:
        raise OptionError(
            f"unknown {what} option(s) {[_name(k) for k in unknown]}; valid options: "
            f"{sorted(_name(k) for k in valid)} and fs.* storage options"
        )
    return plain


def _bool(plain: Mapping[str, str], key: str, default: bool) -> bool:
    raw = plain.get(key)
    if raw is None:
        return default
    if raw.strip().lower() in ("true", "1", "yes"):
        return True
    if raw.strip().lower() in ("false", "0", "no"):
        return False
    raise OptionError(f"option {_name(key)} must be true or false, got {raw!r}")


def _int(plain: Mapping[str, str], key: str, default: int | None, low: int = 1) -> int | None:
    raw = plain.get(key)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise OptionError(f"option {_name(key)} must be an integer, got {raw!r}") from None
    if value < low:
        raise OptionError(f"option {_name(key)} must be at least {low}, got {value}")
    return value


def _path(plain: Mapping[str, str]) -> str:
    path = plain.get("path")
    if not path:
        raise OptionError("a path is required: .load(path) / .save(path) or option path")
    return path


@dataclass(frozen=True)
class ReadOptions:
    path: str
    storage: Mapping[str, Any] = field(default_factory=dict, repr=False)
    checkpoint_id: int | None = None
    operator: str | None = None
    state: str | None = None
    flatten: bool = True
    include_expired: bool = False
    allow_pickle: bool = False
    key_groups_per_partition: int = 32
    watermark: int | None = None
    keys: tuple[Any, ...] | None = None
    key_groups: frozenset[int] | None = None
    subtasks: frozenset[int] | None = None
    read_change_feed: bool = False
    change_start: int | None = None
    change_end: int | None = None
    """The change feed: the changes of the checkpoints ``change_start..change_end`` (inclusive;
    ``None``: up to the latest)."""
    timers: bool = False
    declared: Mapping[str, Any] = field(default_factory=dict)
    """Declared types by state name (options valueType, userKeyType, stateType, types), parsed:
    ``StateDeclaration`` s for :func:`flinkstate.checkpoint.flink.read_savepoint`."""
    flink_version: str | None = None
    """Option flinkVersion: the Flink release that wrote the Flink savepoint read (``"1.15"``),
    where its files do not tell (``read_savepoint(..., flink_version=)``)."""

    @property
    def declares(self) -> bool:
        return bool(self.declared)

    @staticmethod
    def parse(options: Mapping[str, str]) -> ReadOptions:
        plain = _check_known(options, READ_OPTIONS, "read")
        operator, state = plain.get("operator"), plain.get("state")
        timers = _bool(plain, "timers", False)
        if timers and (operator is None or state is not None):
            raise OptionError(
                "option timers=true reads an operator's timers: name it with option operator only"
            )
        if (operator is None) != (state is None) and not timers:
            raise OptionError("options operator and state go together (neither: the metadata view)")
        return ReadOptions(
            _path(plain),
            storage_options(options),
            _int(plain, "checkpointid", None),
            operator,
            state,
            _bool(plain, "flatten", True),
            _bool(plain, "includeexpired", False),
            _bool(plain, "allowpickle", False),
            _int(plain, "keygroupsperpartition", 32) or 32,
            _int(plain, "watermark", None, low=-(1 << 63)),
            *_selection(plain, state is not None),
            *_change_feed(plain, state is not None),
            timers,
            _declared(plain, state),
            flink_version=_flink_version(plain),
        )


def _flink_version(plain: Mapping[str, str]) -> str | None:
    """Option flinkVersion, checked to be a Flink release the reader knows."""
    raw = plain.get("flinkversion")
    if raw is None:
        return None
    from flinkstate.checkpoint.flink import parse_flink_release

    try:
        parse_flink_release(raw)
    except FlinkStateError as exc:
        raise OptionError(f"option flinkVersion: {exc.detail}") from exc
    return raw.strip()


def _declared(plain: Mapping[str, str], state: str | None) -> dict[str, Any]:
    """Options valueType, userKeyType, stateType (for the state read) and types (a JSON object of
    state name -> DDL type, for other states, e.g. a Kryo state stored before it)."""
    import json

    from flinkstate.checkpoint.flink import StateDeclaration, declarations

    out: dict[str, Any] = {}
    if "types" in plain:
        try:
            raw = json.loads(plain["types"])
        except ValueError as exc:
            raise OptionError(f"option types must be a JSON object of state name -> type: {exc}") from None
        if not isinstance(raw, dict) or not all(isinstance(v, str) for v in raw.values()):
            raise OptionError('option types must be a JSON object of state name -> DDL type string, e.g. '
                              '{"k_rich": "STRUCT<id: BIGINT NOT NULL>"}')  # fmt: skip
        out.update(raw)
    mine = [_name(k) for k in ("valuetype", "userkeytype", "statetype") if k in plain]
    if mine:
        if state is None:
            raise OptionError(
                f"option(s) {mine} declare the types of the state read: name it with option state"
            )
        if "valuetype" not in plain:
            raise OptionError(f"option(s) {mine} need option valueType")
        kind = plain.get("statetype", "").strip().lower() or None
        if kind not in (None, "value", "list", "map"):
            raise OptionError(f"option stateType must be value, list or map when reading, got {kind!r}")
        out[state] = StateDeclaration(plain["valuetype"], plain.get("userkeytype"), kind)
    try:
        return dict(declarations(out))
    except FlinkStateError as exc:
        raise OptionError(exc.detail) from exc


def _change_feed(plain: Mapping[str, str], names_a_state: bool) -> tuple[bool, int | None, int | None]:
    """Options ``readChangeFeed``, ``changeStartCheckpointId``, ``changeEndCheckpointId``."""
    feed = _bool(plain, "readchangefeed", False)
    start = _int(plain, "changestartcheckpointid", None)
    end = _int(plain, "changeendcheckpointid", None)
    if not feed:
        if start is not None or end is not None:
            raise OptionError(
                "options changeStartCheckpointId and changeEndCheckpointId need readChangeFeed=true"
            )
        return False, None, None
    if not names_a_state:
        raise OptionError("option readChangeFeed reads the changes of one keyed state: name it with "
                          "options operator and state")  # fmt: skip
    if "checkpointid" in plain:
        raise OptionError("option checkpointId selects one checkpoint; with readChangeFeed=true use "
                          "changeStartCheckpointId and changeEndCheckpointId")  # fmt: skip
    if start is None:
        raise OptionError("option readChangeFeed=true needs changeStartCheckpointId")
    if end is not None and end < start:
        raise OptionError(f"option changeEndCheckpointId ({end}) is before changeStartCheckpointId ({start})")
    return True, start, end


def _selection(
    plain: Mapping[str, str], names_a_state: bool
) -> tuple[tuple[Any, ...] | None, frozenset[int] | None, frozenset[int] | None]:
    """Options ``keys``, ``keyGroups``, ``subtasks``: parsed here, checked against the state later."""
    picked = [_name(k) for k in ("keys", "keygroups", "subtasks") if k in plain]
    if picked and not names_a_state:
        raise OptionError(
            f"option(s) {picked} select part of a state: name it with options operator and state"
        )
    try:
        keys = None if "keys" not in plain else tuple(parse_json_keys(plain["keys"], "keys"))
        groups = None if "keygroups" not in plain else parse_id_set(plain["keygroups"], "keyGroups")
        subtasks = None if "subtasks" not in plain else parse_id_set(plain["subtasks"], "subtasks")
    except FlinkStateError as exc:
        raise OptionError(exc.detail) from exc
    return keys, groups, subtasks


def _columns(plain: Mapping[str, str], key: str) -> tuple[str, ...]:
    raw = plain.get(key)
    if raw is None:
        return ()
    cols = tuple(c.strip() for c in raw.split(",") if c.strip())
    if not cols:
        raise OptionError(f"option {_name(key)} names no column")
    return cols


@dataclass(frozen=True)
class WriteOptions:
    path: str
    operator: str
    state: str
    state_type: str
    key_columns: tuple[str, ...]
    value_columns: tuple[str, ...]
    max_parallelism: int
    parallelism: int
    op_column: str | None = None
    position_column: str | None = None
    namespace_column: str | None = None
    user_key_column: str | None = None
    ttl_ms: int | None = None
    storage: Mapping[str, Any] = field(default_factory=dict, repr=False)
    retain: int | None = None
    format: str = "flinkstate"
    """``flinkstate`` (our checkpoints) or ``flink`` (a canonical Flink savepoint)."""
    flink_types: Mapping[str, str] = field(default_factory=dict)
    """Declared Flink types by option (``flinkkeytype``, ``flinkvaluetype``, ``flinkuserkeytype``)."""
    shared_filesystem: bool = False
    """A local path (``file://`` or plain) is declared shared by every host of a cluster (see
    :mod:`.shared_root`); without it, a cluster's tasks refuse to write to one."""
    flink_version: str | None = None
    """Option flinkVersion (format flink): the Flink release the savepoint is written for
    (``write_operators(..., flink_version=)``; default: the newest, or for an append to a Flink
    1.x savepoint the oldest release it can be from)."""

    @property
    def flink(self) -> bool:
        return self.format == "flink"

    @staticmethod
    def parse(options: Mapping[str, str]) -> WriteOptions:
        plain = _check_known(options, WRITE_OPTIONS, "write")
        for required in ("operator", "state", "statetype"):
            if not plain.get(required):
                raise OptionError(f"option {_name(required)} is required to write state")
        state_type = plain["statetype"].strip().lower()
        if state_type not in STATE_TYPES:
            raise OptionError(
                f"option stateType must be one of {list(STATE_TYPES)}, got {plain['statetype']!r}"
            )
        keys = _columns(plain, "keycolumns")
        if state_type in ("value", "list", "map", "broadcast") and not keys:
            raise OptionError(f"option keyColumns is required for stateType {state_type}")
        if state_type in ("split", "union") and keys:
            raise OptionError(f"operator list state ({state_type}) has no key: drop option keyColumns")
        max_p = _int(plain, "maxparallelism", 128)
        p = _int(plain, "parallelism", 1)
        assert max_p is not None and p is not None
        if max_p > 1 << 15 or p > max_p:
            raise OptionError(f"need 1 <= parallelism ({p}) <= maxParallelism ({max_p}) <= 32768")
        return WriteOptions(
            _path(plain),
            plain["operator"],
            plain["state"],
            state_type,
            keys,
            _columns(plain, "valuecolumns"),
            max_p,
            p,
            plain.get("opcolumn"),
            plain.get("positioncolumn"),
            plain.get("namespacecolumn"),
            plain.get("userkeycolumn"),
            _int(plain, "ttl", None),
            storage_options(options),
            _int(plain, "retain", None),
            *_format(plain),
            shared_filesystem=_bool(plain, "sharedfilesystem", False),
            flink_version=_flink_version(plain),
        )


def _format(plain: Mapping[str, str]) -> tuple[str, dict[str, str]]:
    """Options ``format`` and the Flink types it allows (``flinkKeyType`` ...)."""
    fmt = plain.get("format", "flinkstate").strip().lower()
    if fmt not in WRITE_FORMATS:
        raise OptionError(f"option format must be one of {list(WRITE_FORMATS)}, got {plain['format']!r}")
    types = {k: plain[k] for k in FLINK_TYPES if k in plain}
    if "flinkversion" in plain and fmt != "flink":
        raise OptionError(
            "option flinkVersion names the Flink release to write for: it needs option format flink"
        )
    if types and fmt != "flink":
        names = [_name(k) for k in types]
        raise OptionError(f"option(s) {names} declare Flink types: they need option format flink")
    if fmt == "flink":
        ours = [_name(k) for k in ("opcolumn", "namespacecolumn", "retain", "sharedfilesystem") if k in plain]
        if ours:
            raise OptionError(f"option(s) {ours} do not apply to format flink (a savepoint Flink restores)")
    return fmt, types
