import java.io.BufferedReader;
import java.io.File;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.io.PrintWriter;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.Base64;
import java.util.EnumSet;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.permission.FsPermission;
import org.apache.hadoop.hdfs.DistributedFileSystem;
import org.apache.hadoop.hdfs.HdfsConfiguration;
import org.apache.hadoop.hdfs.MiniDFSCluster;
import org.apache.hadoop.hdfs.MiniDFSNNTopology;
import org.apache.hadoop.hdfs.client.HdfsDataOutputStream;
import org.apache.hadoop.hdfs.server.namenode.ha.HATestUtil;
import org.apache.hadoop.security.UserGroupInformation;

/**
 * dr-toolkit's own launcher of a real HDFS (NameNode(s) + one DataNode) from Hadoop's
 * MiniDFSCluster, for tests, the demo and benchmarks. Not Hadoop code: it only calls
 * MiniDFSCluster's public builder.
 *
 * <pre>
 * java DrtMiniDfs --dir D --ports-file F --rpc P --http P [--ha --rpc2 P --http2 P]
 *                 [--snapshot-root /path]... [--conf key=value]...
 * </pre>
 *
 * <p>Secure mode is opt-in, by configuration alone: with {@code --conf hadoop.security.authentication=kerberos}
 * (and the NameNode's/DataNode's principal and keytab, SPNEGO's, block access tokens: drt_servers/hdfs.py
 * passes them) this process logs in from the NameNode's keytab before the cluster starts, so its
 * own client (the control port below) talks to the secure NameNode as that principal.
 *
 * Writes one JSON line to F (and stdout) once the cluster is up: its ports, then serves a
 * small line protocol on 127.0.0.1:control for what WebHDFS cannot do: keep a file open for
 * write and hflush/hsync it, recover a lease, fail the HA pair over. Sleeps until killed.
 * Data survives a restart: the name directories are formatted only when they do not exist.
 */
public final class DrtMiniDfs {
  private static MiniDFSCluster cluster;
  private static boolean ha;
  private static FileSystem fs;
  private static final Map<String, FSDataOutputStream> OPEN = new HashMap<>();

  public static void main(String[] args) throws Exception {
    String dir = null, portsFile = null;
    int rpc = 0, http = 0, rpc2 = 0, http2 = 0;
    List<String> snapshotRoots = new ArrayList<>();
    Configuration conf = new HdfsConfiguration();
    // defaults for tests (a --conf overrides them)
    conf.set("dfs.permissions.enabled", "false");
    conf.set("dfs.replication", "1");
    conf.set("dfs.webhdfs.enabled", "true");
    // tests create small-block files (the default minimum is 1 MiB)
    conf.set("dfs.namenode.fs-limits.min-block-size", "512");
    conf.set("dfs.client.block.write.replace-datanode-on-failure.enable", "false");
    conf.set("dfs.namenode.safemode.extension", "0");
    conf.set("dfs.datanode.hostname", "127.0.0.1");
    // the HA standby catches up quickly (tests read right after a failover)
    conf.set("dfs.ha.tail-edits.period", "1s");
    for (int i = 0; i < args.length; i++) {
      switch (args[i]) {
        case "--dir": dir = args[++i]; break;
        case "--ports-file": portsFile = args[++i]; break;
        case "--rpc": rpc = Integer.parseInt(args[++i]); break;
        case "--http": http = Integer.parseInt(args[++i]); break;
        case "--rpc2": rpc2 = Integer.parseInt(args[++i]); break;
        case "--http2": http2 = Integer.parseInt(args[++i]); break;
        case "--ha": ha = true; break;
        case "--snapshot-root": snapshotRoots.add(args[++i]); break;
        case "--conf": {
          String kv = args[++i];
          int eq = kv.indexOf('=');
          conf.set(kv.substring(0, eq), kv.substring(eq + 1));
          break;
        }
        default: throw new IllegalArgumentException("unknown argument " + args[i]);
      }
    }
    if (dir == null || portsFile == null) {
      throw new IllegalArgumentException("--dir and --ports-file are required");
    }
    File base = new File(dir);
    boolean format = !new File(base, "name-0-1").exists() && !new File(base, "name1").exists();
    conf.set(MiniDFSCluster.HDFS_MINIDFS_BASEDIR, base.getAbsolutePath());
    boolean secure = "kerberos".equals(conf.get("hadoop.security.authentication"));
    if (secure) {
      UserGroupInformation.setConfiguration(conf);
      UserGroupInformation.loginUserFromKeytab(conf.get("dfs.namenode.kerberos.principal"),
          conf.get("dfs.namenode.keytab.file"));
    }

    MiniDFSCluster.Builder b = new MiniDFSCluster.Builder(conf).numDataNodes(1).format(format)
        .checkExitOnShutdown(false);
    if (ha) {
      MiniDFSNNTopology topo = new MiniDFSNNTopology().addNameservice(
          new MiniDFSNNTopology.NSConf("drt").addNN(
              new MiniDFSNNTopology.NNConf("nn1").setIpcPort(rpc).setHttpPort(http)).addNN(
              new MiniDFSNNTopology.NNConf("nn2").setIpcPort(rpc2).setHttpPort(http2)));
      b.nnTopology(topo);
      // as a real HA deployment: clients (the DataNode's WebHDFS handler included) reach the
      // nameservice, not one NameNode, so a write redirected by the standby still lands
      conf.set("fs.defaultFS", "hdfs://drt");
      conf.set("dfs.client.failover.proxy.provider.drt",
          "org.apache.hadoop.hdfs.server.namenode.ha.ConfiguredFailoverProxyProvider");
      if (!format) {
        // MiniDFSCluster wipes the shared edits directory it manages on every start: keep ours
        b.manageNameDfsSharedDirs(false);
        conf.set("dfs.namenode.shared.edits.dir",
            new File(base, "shared-edits-0-through-1").toURI().toString());
      }
    } else {
      b.nameNodePort(rpc).nameNodeHttpPort(http);
    }
    cluster = b.build();
    if (ha) {
      // the second NameNode is active, the first stays standby: clients that list the
      // NameNodes in order always meet a StandbyException first
      cluster.transitionToActive(1);
      cluster.waitActive(1);
      fs = HATestUtil.configureFailoverFs(cluster, conf);
    } else {
      cluster.waitActive();
      fs = cluster.getFileSystem();
    }
    cluster.waitClusterUp();
    for (String root : snapshotRoots) {
      Path p = new Path(root);
      fs.mkdirs(p);
      ((DistributedFileSystem) fs).allowSnapshot(p);
    }
    ServerSocket control = new ServerSocket(0, 16, InetAddress.getByName("127.0.0.1"));
    StringBuilder json = new StringBuilder("{\"rpc\": [");
    int n = ha ? 2 : 1;
    for (int i = 0; i < n; i++) {
      json.append(i > 0 ? ", " : "").append(cluster.getNameNode(i).getNameNodeAddress().getPort());
    }
    json.append("], \"http\": [");
    for (int i = 0; i < n; i++) {
      json.append(i > 0 ? ", " : "").append(cluster.getNameNode(i).getHttpAddress().getPort());
    }
    json.append("], \"dn_http\": ").append(cluster.getDataNodes().get(0).getInfoPort())
        .append(", \"control\": ").append(control.getLocalPort())
        .append(", \"active\": ").append(ha ? 1 : 0)
        .append(", \"formatted\": ").append(format)
        .append(", \"secure\": ").append(secure)
        .append(", \"user\": \"").append(System.getProperty("user.name")).append("\"}");
    File tmp = new File(portsFile + ".tmp");
    Files.write(tmp.toPath(), (json + "\n").getBytes(StandardCharsets.UTF_8));
    Files.move(tmp.toPath(), new File(portsFile).toPath(), StandardCopyOption.ATOMIC_MOVE);
    System.out.println(json);
    System.out.flush();
    while (true) {
      Socket s = control.accept();
      Thread t = new Thread(() -> serve(s), "drt-control");
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
        String reply;
        try {
          reply = "ok " + handle(line.trim().split(" "));
        } catch (Throwable e) {
          reply = "err " + e.getClass().getName() + ": " + String.valueOf(e.getMessage()).replace('\n', ' ');
        }
        out.println(reply);
      }
    } catch (Exception e) {
      // the client went away
    }
  }

  /** One command of the control protocol; the reply's text after "ok ". */
  private static synchronized String handle(String[] c) throws Exception {
    switch (c[0]) {
      case "ping":
        return "pong";
      case "create": {  // create PATH [BLOCKSIZE]: open a new file for write, keep it open
        long bs = c.length > 2 ? Long.parseLong(c[2]) : fs.getDefaultBlockSize(new Path(c[1]));
        FSDataOutputStream o = fs.create(new Path(c[1]), FsPermission.getFileDefault(), true, 4096,
            (short) 1, bs, null);
        OPEN.put(c[1], o);
        return "";
      }
      case "append": {  // append PATH: reopen for append, keep it open
        OPEN.put(c[1], fs.append(new Path(c[1])));
        return "";
      }
      case "write": {  // write PATH BASE64: write bytes to the open stream (not flushed)
        OPEN.get(c[1]).write(Base64.getDecoder().decode(c.length > 2 ? c[2] : ""));
        return "";
      }
      case "hflush":
        OPEN.get(c[1]).hflush();
        return "";
      case "hsync": {  // hsync with UPDATE_LENGTH: the NameNode learns the visible length
        FSDataOutputStream o = OPEN.get(c[1]);
        ((HdfsDataOutputStream) o).hsync(EnumSet.of(HdfsDataOutputStream.SyncFlag.UPDATE_LENGTH));
        return "";
      }
      case "close":
        OPEN.remove(c[1]).close();
        return "";
      case "recover": {  // the writer dies: forget the stream, let the NameNode close the file
        OPEN.remove(c[1]);
        boolean closed = ((DistributedFileSystem) fs).recoverLease(new Path(c[1]));
        for (int i = 0; i < 100 && !closed; i++) {
          Thread.sleep(100);
          closed = ((DistributedFileSystem) fs).isFileClosed(new Path(c[1]));
        }
        return String.valueOf(closed);
      }
      case "allowsnapshot":
        ((DistributedFileSystem) fs).allowSnapshot(new Path(c[1]));
        return "";
      case "failover": {  // HA: the active NameNode becomes standby and the other one active
        if (!ha) {
          throw new IllegalStateException("not an HA cluster");
        }
        int active = cluster.getNameNode(0).isActiveState() ? 0 : 1;
        cluster.transitionToStandby(active);
        cluster.transitionToActive(1 - active);
        return String.valueOf(1 - active);
      }
      case "active":
        return String.valueOf(ha && cluster.getNameNode(0).isActiveState() ? 0 : (ha ? 1 : 0));
      default:
        throw new IllegalArgumentException("unknown command " + c[0]);
    }
  }
}
