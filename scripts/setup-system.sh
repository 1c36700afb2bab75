#!/usr/bin/env bash
# Install the system packages the tests and the demo need, if they are missing:
# a Java 17 runtime (ZooKeeper, Spark, HDFS, Kafka, HBase), Maven, Debian's zookeeper, PostgreSQL 15, the Kerberos
# headers (the hdfs provider builds gssapi), rsync (benchmark baseline), chromium (UI test), Cyrus SASL + its GSSAPI
# plugin and the compression/TLS headers (librdkafka with Kerberos: scripts/build-librdkafka.sh), npm (librdkafka's source).
set -euo pipefail
need=()
command -v javac >/dev/null 2>&1 || need+=(openjdk-17-jdk-headless)  # javac: the Hadoop-client conformance test and the JAX-RS shim
[ -f /usr/share/java/zookeeper.jar ] || need+=(zookeeper)
[ -x /usr/lib/postgresql/15/bin/initdb ] || need+=(postgresql)
command -v krb5-config >/dev/null 2>&1 || need+=(libkrb5-dev)
[ -f /usr/include/sasl/sasl.h ] || need+=(libsasl2-dev)  # librdkafka's SASL GSSAPI (scripts/build-librdkafka.sh)
ls /usr/lib/*/sasl2/libgssapiv2.so* >/dev/null 2>&1 || need+=(libsasl2-modules-gssapi-mit)  # Cyrus SASL's GSSAPI plugin, loaded at run time
[ -f /usr/include/zstd.h ] || need+=(libzstd-dev)  # librdkafka: zstd-compressed topics
[ -f /usr/include/openssl/ssl.h ] || need+=(libssl-dev)
[ -f /usr/include/zlib.h ] || need+=(zlib1g-dev)
command -v npm >/dev/null 2>&1 || need+=(npm)  # `npm pack`: librdkafka's source
command -v gcc >/dev/null 2>&1 || need+=(gcc)
command -v make >/dev/null 2>&1 || need+=(make)
command -v pkg-config >/dev/null 2>&1 || need+=(pkg-config)
command -v rsync >/dev/null 2>&1 || need+=(rsync)
command -v mvn >/dev/null 2>&1 || need+=(maven)  # the real servers' artifacts (drt_servers/maven)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
if [ ${#need[@]} -eq 0 ]; then
  exit 0
fi
echo "setup: installing system packages: ${need[*]}" >&2
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO=sudo; else
    echo "setup: not root and no sudo: install ${need[*]} with your package manager" >&2; exit 2
  fi
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
