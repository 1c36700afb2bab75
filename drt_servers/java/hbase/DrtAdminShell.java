import java.io.Reader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hbase.HBaseConfiguration;
import org.apache.hadoop.hbase.HConstants;
import org.apache.hadoop.hbase.TableName;
import org.apache.hadoop.hbase.client.Admin;
import org.apache.hadoop.hbase.client.ColumnFamilyDescriptor;
import org.apache.hadoop.hbase.client.ColumnFamilyDescriptorBuilder;
import org.apache.hadoop.hbase.client.Connection;
import org.apache.hadoop.hbase.client.ConnectionFactory;
import org.apache.hadoop.hbase.replication.ReplicationPeerConfig;
import org.apache.hadoop.hbase.util.Bytes;
import org.apache.hadoop.security.UserGroupInformation;

/**
 * The peer and scope commands dr-toolkit's `hbase shell -n FILE` scripts hold, made by a real HBase
 * client of a kerberized cluster (the secure `hbase` stand-in of drt_servers/hbase.py): the client
 * logs in from the Kerberos ticket cache of its environment (KRB5CCNAME) as `hbase shell` does, and
 * every command is an Admin RPC authenticated with SASL/GSSAPI — no ticket, no command.
 *
 * <pre>java DrtAdminShell ZK_HOST ZK_PORT ZNODE_PARENT CLIENT_PROPERTIES SCRIPT</pre>
 *
 * Lines: add_peer 'ID', 'KEY' | enable_peer 'ID' | disable_peer 'ID' | remove_peer 'ID' |
 * alter 'T', {NAME => 'F', REPLICATION_SCOPE => N}[, ...] | exit. Any other line: exit 1, as the shell
 * stops at the first error with -n.
 */
public final class DrtAdminShell {
  private static final Pattern QUOTED = Pattern.compile("'((?:[^'\\\\]|\\\\.)*)'");
  private static final Pattern SCOPE = Pattern.compile("NAME => '([^']+)', REPLICATION_SCOPE => (\\d+)");

  public static void main(String[] a) throws Exception {
    Configuration conf = HBaseConfiguration.create();
    conf.set(HConstants.ZOOKEEPER_QUORUM, a[0]);
    conf.setInt(HConstants.ZOOKEEPER_CLIENT_PORT, Integer.parseInt(a[1]));
    conf.set(HConstants.ZOOKEEPER_ZNODE_PARENT, a[2]);
    Properties p = new Properties();
    try (Reader r = Files.newBufferedReader(Paths.get(a[3]), StandardCharsets.UTF_8)) {
      p.load(r);
    }
    for (String k : p.stringPropertyNames()) {
      conf.set(k, p.getProperty(k));
    }
    conf.setInt("hbase.client.retries.number", 3);
    UserGroupInformation.setConfiguration(conf);
    UserGroupInformation ugi = UserGroupInformation.getLoginUser();
    if (!ugi.hasKerberosCredentials()) {
      System.err.println("ERROR: no Kerberos ticket in the ticket cache (KRB5CCNAME="
          + System.getenv("KRB5CCNAME") + "): run kinit");
      System.exit(1);
    }
    List<String> lines = Files.readAllLines(Paths.get(a[4]), StandardCharsets.UTF_8);
    try (Connection c = ConnectionFactory.createConnection(conf); Admin admin = c.getAdmin()) {
      for (String raw : lines) {
        String line = raw.trim();
        if (line.isEmpty() || line.startsWith("#") || line.equals("exit")) {
          continue;
        }
        String cmd = line.split("\\s+")[0];
        List<String> q = new ArrayList<>();
        Matcher m = QUOTED.matcher(line);
        while (m.find()) {
          q.add(m.group(1));
        }
        long t0 = System.nanoTime();
        if (cmd.equals("add_peer") && !line.contains("TABLE_CFS")) {
          admin.addReplicationPeer(q.get(0), ReplicationPeerConfig.newBuilder().setClusterKey(q.get(1)).build());
        } else if (cmd.equals("enable_peer")) {
          admin.enableReplicationPeer(q.get(0));
        } else if (cmd.equals("disable_peer")) {
          admin.disableReplicationPeer(q.get(0));
        } else if (cmd.equals("remove_peer")) {
          admin.removeReplicationPeer(q.get(0));
        } else if (cmd.equals("alter") && line.contains("REPLICATION_SCOPE")) {
          TableName tn = TableName.valueOf(q.get(0));
          Matcher s = SCOPE.matcher(line);
          while (s.find()) {
            ColumnFamilyDescriptor cf = admin.getDescriptor(tn).getColumnFamily(Bytes.toBytes(s.group(1)));
            admin.modifyColumnFamily(tn, ColumnFamilyDescriptorBuilder.newBuilder(cf)
                .setScope(Integer.parseInt(s.group(2))).build());
          }
        } else {
          System.err.println("ERROR: this hbase stand-in does not run: " + line);
          System.exit(1);
        }
        System.out.printf("Took %.4f seconds%n", (System.nanoTime() - t0) / 1e9);
      }
    }
    System.out.println("as " + ugi.getUserName());
  }
}
