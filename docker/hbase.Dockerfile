# HBase 2.6.1, hadoop3 build: the release the tests run (drt_servers/maven/hbase/pom.xml,
# hbase.version 2.6.1-hadoop3), from the Apache release archive (no public image of it is used).
FROM eclipse-temurin:17-jre
ARG HBASE_VERSION=2.6.1
RUN apt-get update && apt-get install -y --no-install-recommends curl ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && curl -fsSL "https://archive.apache.org/dist/hbase/${HBASE_VERSION}/hbase-${HBASE_VERSION}-hadoop3-bin.tar.gz" \
       | tar -xz -C /opt \
    && ln -s "/opt/hbase-${HBASE_VERSION}-hadoop3" /opt/hbase
ENV HBASE_HOME=/opt/hbase PATH=/opt/hbase/bin:$PATH HBASE_MANAGES_ZK=false
# the image runs one daemon in the foreground: `master start` or `regionserver start`
ENTRYPOINT ["hbase"]
