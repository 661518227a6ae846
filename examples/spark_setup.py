"""What the Spark examples share: arguments, a local SparkSession, storage options."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any


def arguments(description: str, default_url: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("url", nargs="?", default=default_url, help="a local path, file://, s3://bucket/path")
    parser.add_argument("--s3-endpoint", help="an S3 endpoint, e.g. http://127.0.0.1:5555 for moto_server")
    return parser.parse_args()


def storage_options(args: argparse.Namespace) -> dict[str, Any]:
    """fsspec options for the checkpoint API (credentials from the environment or moto's)."""
    if not args.s3_endpoint:
        return {}
    return {
        "key": os.environ.get("AWS_ACCESS_KEY_ID", "testing"),
        "secret": os.environ.get("AWS_SECRET_ACCESS_KEY", "testing"),
        "client_kwargs": {"endpoint_url": args.s3_endpoint},
    }


def spark_options(args: argparse.Namespace) -> dict[str, str]:
    """The same options as ``fs.*`` data source options."""
    opts = storage_options(args)
    out = {f"fs.{k}": str(v) for k, v in opts.items() if k != "client_kwargs"}
    if "client_kwargs" in opts:
        out["fs.client_kwargs.endpoint_url"] = opts["client_kwargs"]["endpoint_url"]
    return out


def make_bucket(args: argparse.Namespace) -> None:
    """Create the S3 bucket of ``args.url`` when it is missing (local S3 servers start empty)."""
    if args.url.startswith("s3://") and args.s3_endpoint:
        import s3fs

        fs = s3fs.S3FileSystem(**storage_options(args))
        bucket = args.url[len("s3://") :].split("/", 1)[0]
        if not fs.exists(bucket):
            fs.mkdir(bucket)


def spark_session() -> Any:
    """A local session; with ``SPARK_REMOTE`` set (``local[2]``, ``sc://host:15002``) a Spark
    Connect session, which has no SparkContext."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from flinkstate.connector import register

    remote = os.environ.get("SPARK_REMOTE")
    if remote:
        spark = SparkSession.builder.remote(remote).getOrCreate()
    else:
        spark = SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false").getOrCreate()
        spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark
