import java.io.BufferedReader;
import java.io.File;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.io.PrintWriter;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.List;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hbase.HBaseConfiguration;
import org.apache.hadoop.hbase.HBaseTestingUtility;
import org.apache.hadoop.hbase.HConstants;
import org.apache.hadoop.hbase.MiniHBaseCluster;
import org.apache.hadoop.hbase.ServerName;
import org.apache.hadoop.hbase.StartMiniClusterOption;
import org.apache.hadoop.hbase.TableName;
import org.apache.hadoop.hbase.client.Admin;
import org.apache.hadoop.hbase.client.ColumnFamilyDescriptorBuilder;
import org.apache.hadoop.hbase.client.Connection;
import org.apache.hadoop.hbase.client.ConnectionFactory;
import org.apache.hadoop.hbase.client.Put;
import org.apache.hadoop.hbase.client.Result;
import org.apache.hadoop.hbase.util.Bytes;
import org.apache.hadoop.hbase.client.ResultScanner;
import org.apache.hadoop.hbase.client.Scan;
import org.apache.hadoop.hbase.client.Table;
import org.apache.hadoop.hbase.client.TableDescriptorBuilder;
import org.apache.hadoop.hbase.regionserver.HRegionServer;
import org.apache.hadoop.hbase.replication.ReplicationPeerConfig;
import org.apache.hadoop.hbase.replication.ReplicationPeerDescription;
import org.apache.hadoop.hbase.util.JVMClusterUtil;
import org.apache.hadoop.hdfs.MiniDFSCluster;

/**
 * One real HBase 2.6 cluster for the tests, in one JVM: HBase's own mini ZooKeeper, a mini HDFS
 * (one DataNode, WebHDFS on), one master and one region server (HBaseTestingUtility).
 *
 * <pre>java HBaseMiniServer DIR ZK_PORT CONTROL_PORT</pre>
 *
 * When the cluster is up it writes DIR/cluster.json (ZooKeeper port and znode parent,
 * hbase.rootdir, NameNode RPC/HTTP ports, region servers with their info ports) and then answers
 * on 127.0.0.1:CONTROL_PORT a line protocol: one request line of space-separated words, one
 * answer line of JSON ({"ok":true,...} or {"ok":false,"error":"..."}). Requests:
 * info | create_table T CF SCOPE [VERSIONS] | put T CF FIRST N [VALUE_BYTES] | cell T ROW CF Q TS VALUE |
 * delete T ROW [CF [Q [TS]]] | count T |
 * add_peer ID CLUSTER_KEY [TABLE_CFS] | add_peer_filtered ID KEY ALL NS TCFS EXNS EXTCFS |
 * need_to_replicate ID TABLE [FAMILY] | enable_peer ID | disable_peer ID | remove_peer ID |
 * list_peers | roll_wal | kill_rs INDEX | start_rs | flush T | alter_scope T CF SCOPE | drop_table T |
 * put_durability T CF FIRST N DURABILITY | set_durability T DURABILITY | bulkload T CF FIRST N.
 * Every Admin call is HBase's own: peers go through master procedures, not ZooKeeper writes.
 */
public final class HBaseMiniServer {
  private static HBaseTestingUtility util;
  private static Connection conn;
  private static Path dir;

  public static void main(String[] args) throws Exception {
    dir = Paths.get(args[0]).toAbsolutePath();
    int zkPort = Integer.parseInt(args[1]);
    int controlPort = Integer.parseInt(args[2]);
    Files.createDirectories(dir);
    System.setProperty("test.build.data.basedirectory", dir.resolve("data").toString());

    Configuration conf = HBaseConfiguration.create();
    conf.setInt("test.hbase.zookeeper.property.clientPort", zkPort);
    conf.set("hbase.zookeeper.quorum", "127.0.0.1");
    // /jmx of the region server (the test-jar's hbase-site.xml turns the info servers off: -1)
    conf.setInt(HConstants.REGIONSERVER_INFO_PORT, 0);
    conf.set("hbase.regionserver.info.bindAddress", "127.0.0.1");
    // the master's info server too: its /master-status lists the peers the running master holds. A
    // deployed master publishes where it listens in its ZooKeeper znode (Master.info_port) when the
    // port is a fixed one (HMaster.putUpJettyServer); with port 0 it would publish a redirect server's.
    // So the launcher picks a free port (-Ddrt.master.info.port) and the master binds it.
    conf.setInt(HConstants.MASTER_INFO_PORT, Integer.getInteger("drt.master.info.port", -1));
    conf.set("hbase.master.info.bindAddress", "127.0.0.1");
    // replication tuned for tests (as HBase's own TestReplicationBase does)
    conf.setBoolean(HConstants.REPLICATION_BULKLOAD_ENABLE_KEY, false);
    conf.setLong("replication.source.sleepforretries", 100);
    conf.setInt("replication.source.maxretriesmultiplier", 10);
    conf.setInt("replication.stats.thread.period.seconds", 5);
    conf.setLong("replication.source.size.capacity", 102400);
    conf.setInt("hbase.regionserver.maxlogs", 10);
    // the region server's metrics (mutationsWithoutWALCount) are summed every second, not every 5
    conf.setLong("hbase.regionserver.metrics.period", 1000);
    conf.setLong("hbase.master.logcleaner.ttl", 10);
    // small and quick
    conf.setInt("hbase.regionserver.handler.count", 5);
    conf.setInt("hbase.regionserver.metahandler.count", 2);
    conf.setInt("hbase.master.handler.count", 5);
    conf.setInt("hbase.hstore.compactionThreshold", 100);
    // A region server the tests kill (abort) whose abort does not finish would otherwise have its
    // "abort monitor" halt the whole JVM 20 minutes later (hbase.regionserver.abort.timeout,
    // SystemExitWhenAbortTimeout): master, ZooKeeper and HDFS with it, under whichever test runs then.
    conf.setLong("hbase.regionserver.abort.timeout", 7L * 24 * 3600 * 1000);
    conf.setInt("dfs.namenode.handler.count", 4);
    conf.setInt("dfs.datanode.handler.count", 4);
    conf.setBoolean("dfs.webhdfs.enabled", true);
    conf.setBoolean("dfs.permissions.enabled", false);
    conf.set("dfs.namenode.http-address", "127.0.0.1:0");

    // Kerberos (opt-in, -Ddrt.secure.conf=FILE: Hadoop/HBase keys, one per line, key=value): the
    // process logs in from its keytab as HBase's own secure tests do (one service principal for the
    // NameNode, DataNode, master and region server), the mini HDFS runs kerberized, and ZooKeeper is an
    // external SASL ZooKeeper (localhost:ZK_PORT; the JAAS "Client" section the launcher passes logs the
    // ZooKeeper client in), never the testing utility's own unauthenticated one.
    String secureConf = System.getProperty("drt.secure.conf");
    if (secureConf != null) {
      java.util.Properties p = new java.util.Properties();
      try (java.io.Reader r = Files.newBufferedReader(Paths.get(secureConf), StandardCharsets.UTF_8)) {
        p.load(r);
      }
      for (String k : p.stringPropertyNames()) {
        conf.set(k, p.getProperty(k));
      }
      conf.set(HConstants.ZOOKEEPER_QUORUM, "localhost");
      conf.setInt(HConstants.ZOOKEEPER_CLIENT_PORT, zkPort);
      org.apache.hadoop.security.UserGroupInformation.setConfiguration(conf);
      org.apache.hadoop.security.UserGroupInformation.loginUserFromKeytab(
          conf.get("hbase.master.kerberos.principal"), conf.get("hbase.master.keytab.file"));
    }

    long t0 = System.nanoTime();
    util = new HBaseTestingUtility(conf);
    if (secureConf != null) {
      util.startMiniDFSCluster(1);
      util.startMiniHBaseCluster(StartMiniClusterOption.builder().numMasters(1).numRegionServers(1).build());
    } else {
      util.startMiniCluster(StartMiniClusterOption.builder().numMasters(1).numRegionServers(1)
          .numDataNodes(1).build());
    }
    conn = ConnectionFactory.createConnection(util.getConfiguration());
    double took = (System.nanoTime() - t0) / 1e9;

    ServerSocket ss = new ServerSocket();
    ss.bind(new InetSocketAddress(InetAddress.getByName("127.0.0.1"), controlPort));
    String json = info(took);
    Path tmp = dir.resolve("cluster.json.tmp");
    Files.write(tmp, json.getBytes(StandardCharsets.UTF_8));
    Files.move(tmp, dir.resolve("cluster.json"), StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
    System.out.println("HBASE READY " + json);
    System.out.flush();
    while (true) {
      Socket s = ss.accept();
      Thread t = new Thread(() -> serve(s), "control");
      t.setDaemon(true);
      t.start();
    }
  }

  private static void serve(Socket s) {
    try (Socket sock = s;
         BufferedReader in = new BufferedReader(new InputStreamReader(sock.getInputStream(), StandardCharsets.UTF_8));
         PrintWriter out = new PrintWriter(new OutputStreamWriter(sock.getOutputStream(), StandardCharsets.UTF_8), true)) {
      String line;
      while ((line = in.readLine()) != null) {
        String answer;
        try {
          answer = handle(line.trim().split("\\s+"));
        } catch (Throwable e) {
          answer = "{\"ok\":false,\"error\":" + q(e.toString()) + "}";
        }
        out.println(answer);
      }
    } catch (Exception e) {
      // client went away
    }
  }

  private static String handle(String[] a) throws Exception {
    Admin admin = conn.getAdmin();
    try {
      switch (a[0]) {
        case "info":
          return info(0);
        case "create_table": {
          TableName tn = TableName.valueOf(a[1]);
          if (tn.getNamespaceAsString().length() > 0 && !tn.getNamespaceAsString().equals("default")) {
            boolean have = false;
            for (org.apache.hadoop.hbase.NamespaceDescriptor nd : admin.listNamespaceDescriptors()) {
              have |= nd.getName().equals(tn.getNamespaceAsString());
            }
            if (!have) {
              admin.createNamespace(org.apache.hadoop.hbase.NamespaceDescriptor.create(tn.getNamespaceAsString()).build());
            }
          }
          TableDescriptorBuilder b = TableDescriptorBuilder.newBuilder(tn);
          for (String cf : a[2].split(",")) {
            b.setColumnFamily(ColumnFamilyDescriptorBuilder.newBuilder(Bytes.toBytes(cf))
                .setScope(Integer.parseInt(a[3])).setMaxVersions(a.length > 4 ? Integer.parseInt(a[4]) : 1).build());
          }
          if (!admin.tableExists(tn)) {
            if (a.length > 5 && !a[5].equals("-")) {  // pre-split: comma-separated split keys
              String[] keys = a[5].split(",");
              byte[][] splits = new byte[keys.length][];
              for (int i = 0; i < keys.length; i++) {
                splits[i] = Bytes.toBytes(keys[i]);
              }
              admin.createTable(b.build(), splits);
            } else {
              admin.createTable(b.build());
            }
          }
          return "{\"ok\":true}";
        }
        case "put": {
          TableName tn = TableName.valueOf(a[1]);
          byte[] cf = Bytes.toBytes(a[2]);
          long first = Long.parseLong(a[3]);
          int n = Integer.parseInt(a[4]);
          int size = a.length > 5 ? Integer.parseInt(a[5]) : 100;
          List<Put> puts = new ArrayList<>();
          for (long i = first; i < first + n; i++) {
            byte[] v = new byte[size];
            java.util.Arrays.fill(v, (byte) ('a' + (i % 26)));
            puts.add(new Put(Bytes.toBytes(String.format("row-%010d", i))).addColumn(cf, Bytes.toBytes("q"), v));
          }
          try (Table t = conn.getTable(tn)) {
            t.put(puts);
          }
          return "{\"ok\":true,\"rows\":" + n + "}";
        }
        case "put_durability": {
          // put_durability T CF FIRST N DURABILITY: rows as `put` names them, each Put with that
          // Durability (SKIP_WAL: the client asks the region server not to write the WAL)
          TableName tn = TableName.valueOf(a[1]);
          byte[] cf = Bytes.toBytes(a[2]);
          long first = Long.parseLong(a[3]);
          int n = Integer.parseInt(a[4]);
          org.apache.hadoop.hbase.client.Durability d = org.apache.hadoop.hbase.client.Durability.valueOf(a[5]);
          List<Put> puts = new ArrayList<>();
          for (long i = first; i < first + n; i++) {
            Put p = new Put(Bytes.toBytes(String.format("row-%010d", i)))
                .addColumn(cf, Bytes.toBytes("q"), Bytes.toBytes("v" + i));
            p.setDurability(d);
            puts.add(p);
          }
          try (Table t = conn.getTable(tn)) {
            t.put(puts);
          }
          return "{\"ok\":true,\"rows\":" + n + "}";
        }
        case "bulkload": {
          // bulkload T CF FIRST N: rows as `put` names them, written into one HFile on the cluster's HDFS
          // and bulk-loaded (BulkLoadHFiles): no WAL edit carries their cells
          TableName tn = TableName.valueOf(a[1]);
          byte[] cf = Bytes.toBytes(a[2]);
          long first = Long.parseLong(a[3]);
          int n = Integer.parseInt(a[4]);
          Configuration c = util.getConfiguration();
          org.apache.hadoop.fs.FileSystem fs = util.getTestFileSystem();
          org.apache.hadoop.fs.Path dirp = new org.apache.hadoop.fs.Path(
              "/bulkload-" + System.nanoTime());
          org.apache.hadoop.fs.Path file = new org.apache.hadoop.fs.Path(new org.apache.hadoop.fs.Path(dirp, a[2]), "hfile");
          long ts = System.currentTimeMillis();
          try (org.apache.hadoop.hbase.io.hfile.HFile.Writer w = org.apache.hadoop.hbase.io.hfile.HFile
              .getWriterFactory(c, new org.apache.hadoop.hbase.io.hfile.CacheConfig(c)).withPath(fs, file)
              .withFileContext(new org.apache.hadoop.hbase.io.hfile.HFileContextBuilder().build()).create()) {
            for (long i = first; i < first + n; i++) {
              w.append(new org.apache.hadoop.hbase.KeyValue(Bytes.toBytes(String.format("row-%010d", i)), cf,
                  Bytes.toBytes("q"), ts, Bytes.toBytes("b" + i)));
            }
          }
          org.apache.hadoop.hbase.tool.BulkLoadHFiles.create(c).bulkLoad(tn, dirp);
          return "{\"ok\":true,\"rows\":" + n + "}";
        }
        case "set_durability": {
          // set_durability T DURABILITY: the table descriptor's DURABILITY (HBase's modifyTable)
          TableName tn = TableName.valueOf(a[1]);
          admin.modifyTable(TableDescriptorBuilder.newBuilder(admin.getDescriptor(tn))
              .setDurability(org.apache.hadoop.hbase.client.Durability.valueOf(a[2])).build());
          return "{\"ok\":true}";
        }
        case "cell": {
          // cell T ROW CF Q TS VALUE: one cell (TS "-" = the server's time), as a client would put it
          Put p = new Put(Bytes.toBytes(a[2]));
          if (a[5].equals("-")) {
            p.addColumn(Bytes.toBytes(a[3]), Bytes.toBytes(a[4]), Bytes.toBytes(a[6]));
          } else {
            p.addColumn(Bytes.toBytes(a[3]), Bytes.toBytes(a[4]), Long.parseLong(a[5]), Bytes.toBytes(a[6]));
          }
          try (Table t = conn.getTable(TableName.valueOf(a[1]))) {
            t.put(p);
          }
          return "{\"ok\":true}";
        }
        case "delete": {
          // delete T ROW [CF [Q [TS]]]: a row, a family, the newest version of a column, or one version
          org.apache.hadoop.hbase.client.Delete d = new org.apache.hadoop.hbase.client.Delete(Bytes.toBytes(a[2]));
          if (a.length == 4) {
            d.addFamily(Bytes.toBytes(a[3]));
          } else if (a.length == 5) {
            d.addColumn(Bytes.toBytes(a[3]), Bytes.toBytes(a[4]));
          } else if (a.length >= 6) {
            d.addColumn(Bytes.toBytes(a[3]), Bytes.toBytes(a[4]), Long.parseLong(a[5]));
          }
          try (Table t = conn.getTable(TableName.valueOf(a[1]))) {
            t.delete(d);
          }
          return "{\"ok\":true}";
        }
        case "count": {
          long n = 0;
          try (Table t = conn.getTable(TableName.valueOf(a[1])); ResultScanner rs = t.getScanner(new Scan())) {
            for (Result r : rs) {
              n++;
            }
          }
          return "{\"ok\":true,\"rows\":" + n + "}";
        }
        case "count_range": {
          // rows present in [row-<first>, row-<first+n>) (a replicated range is checked row by row)
          long first = Long.parseLong(a[2]);
          long n = Long.parseLong(a[3]);
          Scan scan = new Scan().withStartRow(Bytes.toBytes(String.format("row-%010d", first)))
              .withStopRow(Bytes.toBytes(String.format("row-%010d", first + n)));
          long got = 0;
          try (Table t = conn.getTable(TableName.valueOf(a[1])); ResultScanner rs = t.getScanner(scan)) {
            for (Result r : rs) {
              got++;
            }
          }
          return "{\"ok\":true,\"rows\":" + got + "}";
        }
        case "alter_scope": {
          TableName tn = TableName.valueOf(a[1]);
          org.apache.hadoop.hbase.client.ColumnFamilyDescriptor cur =
              admin.getDescriptor(tn).getColumnFamily(Bytes.toBytes(a[2]));
          admin.modifyColumnFamily(tn, ColumnFamilyDescriptorBuilder.newBuilder(cur)
              .setScope(Integer.parseInt(a[3])).build());
          return "{\"ok\":true}";
        }
        case "drop_table": {
          TableName tn = TableName.valueOf(a[1]);
          if (admin.tableExists(tn)) {
            if (admin.isTableEnabled(tn)) {
              admin.disableTable(tn);
            }
            admin.deleteTable(tn);
          }
          return "{\"ok\":true}";
        }
        case "flush":
          admin.flush(TableName.valueOf(a[1]));
          return "{\"ok\":true}";
        case "add_peer": {
          org.apache.hadoop.hbase.replication.ReplicationPeerConfigBuilder pb = ReplicationPeerConfig.newBuilder().setClusterKey(a[2]);
          if (a.length > 3) {
            pb.setReplicateAllUserTables(false).setTableCFsMap(tableCfs(a[3]));
          }
          admin.addReplicationPeer(a[1], pb.build(), true);
          return "{\"ok\":true}";
        }
        case "add_peer_filtered": {
          // add_peer_filtered ID CLUSTER_KEY REPLICATE_ALL NAMESPACES TABLE_CFS EXCLUDE_NAMESPACES EXCLUDE_TABLE_CFS
          // lists: ns1,ns2 / ns:t:cf1,cf2;t2 ; "-" for none. The peer is added DISABLED (nothing ships).
          org.apache.hadoop.hbase.replication.ReplicationPeerConfigBuilder pb = ReplicationPeerConfig.newBuilder()
              .setClusterKey(a[2]).setReplicateAllUserTables(Boolean.parseBoolean(a[3]));
          if (!a[4].equals("-")) {
            pb.setNamespaces(new java.util.HashSet<>(java.util.Arrays.asList(a[4].split(","))));
          }
          if (!a[5].equals("-")) {
            pb.setTableCFsMap(tableCfs(a[5]));
          }
          if (!a[6].equals("-")) {
            pb.setExcludeNamespaces(new java.util.HashSet<>(java.util.Arrays.asList(a[6].split(","))));
          }
          if (!a[7].equals("-")) {
            pb.setExcludeTableCFsMap(tableCfs(a[7]));
          }
          admin.addReplicationPeer(a[1], pb.build(), false);
          return "{\"ok\":true}";
        }
        case "need_to_replicate": {
          // need_to_replicate ID TABLE [FAMILY]: HBase's own rule for the peer's filters
          ReplicationPeerConfig pc = admin.getReplicationPeerConfig(a[1]);
          boolean need = pc.needToReplicate(TableName.valueOf(a[2]), a.length > 3 ? Bytes.toBytes(a[3]) : null);
          return "{\"ok\":true,\"need\":" + need + "}";
        }
        case "enable_peer":
          admin.enableReplicationPeer(a[1]);
          return "{\"ok\":true}";
        case "disable_peer":
          admin.disableReplicationPeer(a[1]);
          return "{\"ok\":true}";
        case "remove_peer":
          admin.removeReplicationPeer(a[1]);
          return "{\"ok\":true}";
        case "list_peers": {
          StringBuilder sb = new StringBuilder("{\"ok\":true,\"peers\":[");
          boolean first = true;
          for (ReplicationPeerDescription d : admin.listReplicationPeers()) {
            sb.append(first ? "" : ",").append("{\"id\":").append(q(d.getPeerId()))
                .append(",\"enabled\":").append(d.isEnabled())
                .append(",\"cluster_key\":").append(q(d.getPeerConfig().getClusterKey()))
                .append(",\"table_cfs\":").append(q(String.valueOf(d.getPeerConfig().getTableCFsMap())))
                .append("}");
            first = false;
          }
          return sb.append("]}").toString();
        }
        case "roll_wal": {
          for (ServerName sn : admin.getRegionServers()) {
            admin.rollWALWriter(sn);
          }
          return "{\"ok\":true}";
        }
        case "kill_rs": {
          MiniHBaseCluster c = util.getMiniHBaseCluster();
          int i = Integer.parseInt(a[1]);
          ServerName sn = c.getRegionServer(i).getServerName();
          c.killRegionServer(sn);
          c.waitForRegionServerToStop(sn, 60000);
          return "{\"ok\":true,\"server\":" + q(sn.toString()) + "}";
        }
        case "start_rs": {
          JVMClusterUtil.RegionServerThread t = util.getMiniHBaseCluster().startRegionServer();
          t.waitForServerOnline();
          return "{\"ok\":true,\"server\":" + q(t.getRegionServer().getServerName().toString()) + "}";
        }
        default:
          return "{\"ok\":false,\"error\":" + q("unknown request " + a[0]) + "}";
      }
    } finally {
      admin.close();
    }
  }

  private static String info(double took) throws Exception {
    Configuration c = util.getConfiguration();
    MiniDFSCluster dfs = util.getDFSCluster();
    StringBuilder rs = new StringBuilder("[");
    boolean first = true;
    for (JVMClusterUtil.RegionServerThread t : util.getMiniHBaseCluster().getLiveRegionServerThreads()) {
      HRegionServer r = t.getRegionServer();
      rs.append(first ? "" : ",").append("{\"server_name\":").append(q(r.getServerName().toString()))
          .append(",\"info_port\":").append(r.getInfoServer() == null ? -1 : r.getInfoServer().getPort())
          .append("}");
      first = false;
    }
    rs.append("]");
    return "{\"ok\":true"
        + ",\"zk_quorum\":" + q(c.get(HConstants.ZOOKEEPER_QUORUM))
        + ",\"zk_port\":" + c.getInt(HConstants.ZOOKEEPER_CLIENT_PORT, -1)
        + ",\"znode_parent\":" + q(c.get(HConstants.ZOOKEEPER_ZNODE_PARENT, HConstants.DEFAULT_ZOOKEEPER_ZNODE_PARENT))
        + ",\"rootdir\":" + q(c.get(HConstants.HBASE_DIR))
        + ",\"wal_dir\":" + q(c.get("hbase.wal.dir", c.get(HConstants.HBASE_DIR)))
        + ",\"nn_rpc_port\":" + dfs.getNameNodePort()
        + ",\"nn_http_port\":" + dfs.getNameNode().getHttpAddress().getPort()
        + ",\"master\":" + q(util.getMiniHBaseCluster().getMaster().getServerName().toString())
        + ",\"master_info_port\":" + (util.getMiniHBaseCluster().getMaster().getInfoServer() == null ? -1
            : util.getMiniHBaseCluster().getMaster().getInfoServer().getPort())
        + ",\"region_servers\":" + rs
        + ",\"started_in_s\":" + took
        + ",\"pid\":" + ProcessHandle.current().pid()
        + "}";
  }

  private static String q(String s) {
    if (s == null) {
      return "null";
    }
    StringBuilder b = new StringBuilder("\"");
    for (char ch : s.toCharArray()) {
      if (ch == '"' || ch == '\\') {
        b.append('\\').append(ch);
      } else if (ch < 0x20) {
        b.append(String.format("\\u%04x", (int) ch));
      } else {
        b.append(ch);
      }
    }
    return b.append('"').toString();
  }

  private HBaseMiniServer() {
  }

  static java.util.Map<TableName, List<String>> tableCfs(String spec) {
    java.util.Map<TableName, List<String>> m = new java.util.HashMap<>();
    for (String part : spec.split(";")) {
      String[] tc = part.split(":");
      String table = tc.length == 3 ? tc[0] + ":" + tc[1] : tc[0];
      String cfs = tc.length == 3 ? tc[2] : (tc.length == 2 ? tc[1] : "");
      List<String> l = new ArrayList<>();
      for (String c : cfs.split(",")) {
        if (!c.isEmpty()) {
          l.add(c);
        }
      }
      m.put(TableName.valueOf(table), l.isEmpty() ? null : l);
    }
    return m;
  }
}
