"""Refusing a local checkpoint root that Spark's executors do not share.

A ``file://`` or plain-path root is a directory of each host: on a cluster (a Spark master
other than ``local[...]``), every executor would write its files on its own host, and the
driver would publish a checkpoint whose files it cannot see. So a write to such a root is
refused before anything is written (``[LOCAL_ROOT_NOT_SHARED]``), unless it is declared
shared (a network mount on every host): the write option ``sharedFilesystem=true``, or
``shared_filesystem=True`` of ``process``, ``coprocess`` and ``foreach_batch``. Reads are
not refused, and where it cannot be told whether the tasks run on a cluster, nothing is.

``process`` asks the driver's session for the master (``spark.conf``, on Spark Connect too)
and refuses before any task runs. A data source writer gets only its options, in a Python
worker of the driver that has no session; its tasks refuse instead, before they write a
byte, when they run in another JVM than the driver (``local[...]`` runs them in the
driver's). A Python worker knows its JVM by the block-manager directories Spark hands it
(``SPARK_LOCAL_DIRS``, made for each JVM; PySpark spills to them).
"""

from __future__ import annotations

import os
from typing import Any

from flinkstate.checkpoint import Storage

from .errors import RootNotSharedError

WRITE_DECLARATION = "the write option sharedFilesystem=true"
PROCESS_DECLARATION = "shared_filesystem=True"


def cluster_master(spark: Any) -> str | None:
    """``spark``'s master when its executors run outside the driver (anything but ``local``
    and ``local[...]``); ``None`` when it is local or cannot be told."""
    try:
        master = spark.conf.get("spark.master", None)
    except Exception:  # a session that cannot answer: nothing is refused
        return None
    if not isinstance(master, str) or not master or master == "local" or master.startswith("local["):
        return None
    return master


def spark_process() -> str | None:
    """Which Spark JVM this Python process works for (its block-manager directories);
    ``None`` outside Spark."""
    return os.environ.get("SPARK_LOCAL_DIRS") or None


def refuse_unshared(root: Storage, shared: bool, cluster: str | None, declare: str) -> None:
    """Refuse a write to ``root`` when it is a local path, ``cluster`` says why the writers are
    on other hosts than the committer, and ``shared`` (``declare``: how to say so) is not set."""
    if shared or cluster is None or not root.is_local:
        return
    raise RootNotSharedError(
        f"the checkpoint root {root.safe_url} is a local path, and {cluster}: each host would write "
        "its own copy of the files, and the driver would publish a checkpoint whose files it "
        "cannot see. Write to a filesystem every host shares (s3://, hdfs://, ...), or, if this "
        f"path is one (a network mount on every host), declare it with {declare}"
    )


def refuse_unshared_task(root: Storage, shared: bool, driver: str | None) -> None:
    """In a write task: refuse a local, undeclared ``root`` when the task runs in another JVM
    than ``driver`` (the writer's :func:`spark_process`, taken on the driver)."""
    here = spark_process()
    elsewhere = driver is not None and here is not None and here != driver
    reason = "this task runs in an executor outside the driver's JVM (a cluster, not local[...])"
    refuse_unshared(root, shared, reason if elsewhere else None, WRITE_DECLARATION)
