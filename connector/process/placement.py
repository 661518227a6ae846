"""Placement: each subtask's task sent to the executor that kept its state.

Spark's scheduler places a task where its RDD partition prefers (delay scheduling: it waits
``spark.locality.wait``, 3 s by default, for that executor before it runs the task elsewhere).
PySpark's DataFrame API has no way to state a preference, so a run's routed input goes
through a small JVM class of ours, ``flinkstate.spark.PlacedRDD`` (``connector/jvm``, built
by ``make setup`` into the package): it forwards its parent's partitions one to one, prefers
the executor given per partition, and records in each task's local properties where it ran.
A run stores those locations in its checkpoint (:data:`LOCATIONS`, with the application id),
and the next run of the same application prefers them.

Only classic PySpark on a cluster (a master that is not ``local[...]``) is placed, unless the
session sets ``spark.flinkstate.placement`` to ``false`` (:data:`ENABLED`): Spark
Connect has no JVM gateway on the client, and one local executor has nowhere else to go.
Elsewhere, and when the class is not there (``javac`` missing at set-up), a run is not placed
and the executor caches carry it (:mod:`.task.live`). Placement changes where tasks run, never
what they compute.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..shared_root import cluster_master

LOCATIONS = "flinkstate.process.subtask_locations"
"""Checkpoint property: ``<application id> <location per subtask>`` (``-``: not known)."""

LOCATION_PROPERTY = "flinkstate.executor.location"
"""The task local property the JVM class sets to the executor the task ran on."""

ENABLED = "spark.flinkstate.placement"
"""Session configuration: ``false`` turns placement off (it is on by default)."""

JAR = Path(__file__).parent.parent / "jvm" / "flinkstate-spark.jar"
"""Built by the Makefile from ``connector/jvm``."""
_CLASS = "flinkstate.spark.PlacedRDD"
_LOG = logging.getLogger("flinkstate.process")
_LOCK = threading.Lock()
_LOADED: dict[int, tuple[Any, Any]] = {}
"""Per SparkContext (by id): (the context, the class's constructor), loaded once."""


def here() -> str:
    """Where this task runs (``executor_<host>_<id>``), as the JVM class recorded it; "" when
    the task was not placed."""
    from pyspark import TaskContext

    context = TaskContext.get()
    found = context.getLocalProperty(LOCATION_PROPERTY) if context is not None else None
    return found or ""


def preferred(properties: Mapping[str, str], spark: Any, parallelism: int) -> list[str]:
    """The locations a run of ``parallelism`` subtasks prefers: where the base checkpoint's
    run placed each subtask, when that run was of this application ("" for each otherwise)."""
    recorded = properties.get(LOCATIONS, "").split()
    app = _application(spark)
    if not recorded or app is None or recorded[0] != app or len(recorded) != parallelism + 1:
        return [""] * parallelism
    return ["" if loc == "-" else loc for loc in recorded[1:]]


def location_properties(spark: Any, locations: Sequence[str]) -> dict[str, str]:
    """The checkpoint property recording where each subtask ran (nothing when none was placed)."""
    app = _application(spark)
    if app is None or not any(locations):
        return {}
    return {LOCATIONS: " ".join([app, *(loc or "-" for loc in locations)])}


def place(frame: Any, locations: Sequence[str]) -> Any:
    """``frame`` (one partition per subtask) with partition i preferring ``locations[i]``, and
    each task recording where it ran; ``frame`` itself where runs are not placed."""
    spark = frame.sparkSession
    constructor = _constructor(spark)
    if constructor is None:
        return frame
    from pyspark.sql import DataFrame

    gateway = spark.sparkContext._gateway
    jvm = spark.sparkContext._jvm
    rows = frame._jdf.queryExecution().toRdd()
    if rows.getNumPartitions() != len(locations):  # not one partition per subtask: leave it
        return frame
    prefs = gateway.new_array(jvm.java.lang.String, len(locations))
    for i, location in enumerate(locations):
        prefs[i] = location
    args = gateway.new_array(jvm.java.lang.Object, 2)
    args[0] = rows
    args[1] = prefs
    placed = constructor.newInstance(args)
    jdf = spark._jsparkSession.internalCreateDataFrame(placed, frame._jdf.schema(), False)
    return DataFrame(jdf, spark)


def _application(spark: Any) -> str | None:
    context = getattr(spark, "_sc", None)  # Connect sessions have none
    return None if context is None else str(context.applicationId)


def _constructor(spark: Any) -> Any:
    """The JVM class's constructor for ``spark``'s context, loading the class and shipping its
    jar to the executors once; None where runs are not placed."""
    context = getattr(spark, "_sc", None)
    if context is None or not hasattr(spark, "_jsparkSession") or cluster_master(spark) is None:
        return None
    if str(spark.conf.get(ENABLED, "true")).strip().lower() == "false":
        return None
    with _LOCK:
        loaded = _LOADED.get(id(context))
        if loaded is not None and loaded[0] is context:
            return loaded[1]
        constructor = _load(context)
        _LOADED[id(context)] = (context, constructor)
        return constructor


def _load(context: Any) -> Any:
    if not JAR.is_file():
        _LOG.warning("placement is off: %s is missing (built by `make setup` when javac is there)", JAR)
        return None
    jvm = context._jvm
    url = jvm.java.io.File(str(JAR)).toURI().toURL()
    urls = context._gateway.new_array(jvm.java.net.URL, 1)
    urls[0] = url
    parent = jvm.java.lang.Thread.currentThread().getContextClassLoader()
    loader = jvm.java.net.URLClassLoader(urls, parent)
    constructor = loader.loadClass(_CLASS).getConstructors()[0]
    context._jsc.sc().addJar(str(JAR))  # the executors load the class from the shipped jar
    return constructor
