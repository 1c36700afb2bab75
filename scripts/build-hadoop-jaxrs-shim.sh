#!/usr/bin/env bash
# Build the one-class JAX-RS runtime that lets pyspark's bundled Hadoop client speak WebHDFS
# (dr_toolkit/spark/jaxrs/MediaTypeRuntimeDelegate.java, compiled against Spark's own jars into
# ~/.cache/dr-toolkit/ or $DRT_CACHE_DIR). Without a JDK it says so and exits 0: Spark then
# refuses webhdfs:// with a clear error and reads hdfs:// through hdfs.rpc_addresses instead.
set -uo pipefail
PY=${PY:-.venv/bin/python}
if ! command -v javac >/dev/null 2>&1 && [ ! -x "${JAVA_HOME:-/nonexistent}/bin/javac" ]; then
  echo "build-hadoop-jaxrs-shim: no javac; Spark will refuse webhdfs:// (use hdfs.rpc_addresses)" >&2
  exit 0
fi
"$PY" -m dr_toolkit.spark.hadoop build-shim
