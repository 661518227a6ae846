"""Errors of the Spark connector: part of the one flinkstate hierarchy."""

from __future__ import annotations

from flinkstate.state import FlinkStateError


class ProcessError(FlinkStateError, ValueError):
    """A bad argument or input of the Spark runner (``process``, ``foreach_batch``)."""

    default_code = "INVALID_PROCESS_ARGUMENT"


class OptionError(FlinkStateError, ValueError):
    """A data source option is unknown, missing or malformed."""

    default_code = "INVALID_OPTION"


class ChangeFeedError(OptionError):
    """The asked range of changes cannot be answered exactly."""

    default_code = "CHANGE_FEED_UNAVAILABLE"


class RootNotSharedError(FlinkStateError, ValueError):
    """A write to a local checkpoint root on a Spark cluster, whose executors do not share it
    (unless declared shared): refused before anything is written."""

    default_code = "LOCAL_ROOT_NOT_SHARED"
