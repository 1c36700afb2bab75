"""The launcher of the real servers the tests, the demo and the benchmarks run — docs/contracts.md, the real servers.

One module per component, all built on :class:`drt_servers.process.ManagedProcess` (a process
on free 127.0.0.1 ports with its log kept, start / stop / kill / restart for fault injection,
its start-up time and memory measured):

* :mod:`drt_servers.zookeeper` — ZooKeeper 3.8 from Debian's jars;
* :mod:`drt_servers.hdfs` — two HDFS clusters (``MiniDFSCluster`` from
  ``hadoop-client-minicluster``) and Hadoop DistCp;
* :mod:`drt_servers.kafka` — two KRaft brokers (``kafka_2.13`` 4.x) and MirrorMaker 2;
* :mod:`drt_servers.hbase` — two HBase 2.6 clusters on real HDFS with a replication peer.

The JVM servers' jars come from Maven Central: each component has a ``pom.xml`` under
``drt_servers/maven/<component>/`` pinning its coordinates; :mod:`drt_servers.maven` resolves
it once (``make setup`` → ``python -m drt_servers resolve``) into the local Maven repository and
caches the classpath; later starts are offline. A missing artifact is an error naming the
coordinate — never a skip. Small Java mains of our own live in ``drt_servers/java/``.

This package is outside the library: ``dr_toolkit`` never imports it.
"""
