package org.drtoolkit.copy;

import java.io.PrintStream;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.security.PrivilegedExceptionAction;
import java.util.ArrayList;
import java.util.List;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.hdfs.DistributedFileSystem;
import org.apache.hadoop.hdfs.HdfsConfiguration;
import org.apache.hadoop.hdfs.inotify.Event;
import org.apache.hadoop.hdfs.inotify.EventBatch;
import org.apache.hadoop.hdfs.inotify.EventBatchList;
import org.apache.hadoop.hdfs.protocol.ClientProtocol;
import org.apache.hadoop.security.UserGroupInformation;

/**
 * dr-toolkit's reader of a NameNode's edit log as HDFS inotify events, for the gate's quick path
 * (dr_toolkit/copy/editlog.py). Not Hadoop code: it calls the NameNode's own RPC,
 * {@code ClientProtocol.getEditsFromTxid} (what {@code HdfsAdmin.getInotifyEventStream} polls),
 * directly, so it knows exactly which transactions it has read.
 *
 * <pre>
 * java org.drtoolkit.copy.HdfsEdits RPC_HOST:PORT AFTER_TXID TO_TXID MAX_EVENTS MAX_SECONDS ROOT...
 * </pre>
 *
 * Reads every transaction after AFTER_TXID up to at least TO_TXID (the NameNode answers in batches
 * of up to dfs.namenode.inotify.max.events.per.rpc events; a gap — the first transaction answered
 * is not the one asked for — means the edits are gone: purged after a checkpoint). Prints, one JSON
 * object a line: {@code {"e": ...}} for each event that touches a ROOT (a path or a rename's
 * destination at or below it, or a rename, unlink or create of one of its ancestors), at most
 * MAX_EVENTS of them — access-time-only updates (METADATA TIMES without an mtime: a read's atime,
 * dfs.namenode.accesstime.precision) only counted —, then one {@code {"done": ...}} line: the last
 * transaction read, the events read in all, those that touched a root, the access-time-only ones,
 * whether MAX_EVENTS was passed. A failure prints one
 * {@code {"error": ..., "kind": ...}} line (kind: superuser, missing, standby, bound, other) and
 * exits 2. Needs the HDFS superuser (the NameNode checks it when permissions are on).
 *
 * <pre>
 * java org.drtoolkit.copy.HdfsEdits --roll RPC_HOST:PORT
 * </pre>
 *
 * Has the NameNode roll its edit log ({@code ClientProtocol.rollEdits}, what {@code hdfs dfsadmin
 * -rollEdits} calls: the current segment is finalized with an END_LOG_SEGMENT transaction and a new
 * one begun with a START_LOG_SEGMENT transaction) and prints {@code {"rolled": TXID}}: the first
 * transaction id of the new segment (its START_LOG_SEGMENT). The proof does this before it reads a
 * side's txid, so that the txid it records sits at the start of a segment: {@code getEditsFromTxid}
 * decodes the segment holding the asked txid from the segment's start on every call. Needs the HDFS
 * superuser and the active NameNode (a standby answers StandbyException: kind standby); the same
 * errors and the same Kerberos login as the read.
 *
 * <p>Kerberos: with the system property {@code drt.kerberos.principal} (or only a ticket cache) the reader
 * logs in as that principal — from the keytab {@code drt.kerberos.keytab} ({@code UserGroupInformation.loginUserFromKeytab},
 * which also logs in again from it when a connection needs a new ticket), else from the ticket cache
 * {@code drt.kerberos.ccache} — with {@code hadoop.security.authentication=kerberos}, and calls the
 * NameNode as it. The NameNode's own principal comes from the Hadoop configuration on the classpath
 * ({@code dfs.namenode.kerberos.principal}, what an edge node's hdfs-site.xml has). A failed login or
 * SASL handshake prints kind {@code kerberos}.
 */
public final class HdfsEdits {
  private HdfsEdits() {
  }

  static String q(String s) {
    if (s == null) {
      return "null";
    }
    StringBuilder b = new StringBuilder("\"");
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      switch (c) {
        case '"': b.append("\\\""); break;
        case '\\': b.append("\\\\"); break;
        default:
          if (c < 0x20 || (c >= 0x7f && c < 0xa0) || Character.isSurrogate(c)) {
            b.append(String.format("\\u%04x", (int) c));
          } else {
            b.append(c);
          }
      }
    }
    return b.append('"').toString();
  }

  /** 0: not related; 1: at or below the root; 2: a strict ancestor of the root. */
  static int rel(String path, String root) {
    if (path == null) {
      return 0;
    }
    String p = path.length() > 1 && path.endsWith("/") ? path.substring(0, path.length() - 1) : path;
    if (p.equals(root) || p.startsWith(root.equals("/") ? "/" : root + "/")) {
      return 1;
    }
    if (p.equals("/") || root.startsWith(p + "/")) {
      return 2;
    }
    return 0;
  }

  static int touches(Event e, List<String> roots) {
    int best = 0;
    for (String root : roots) {
      String path = null, dst = null;
      boolean structural = false;
      switch (e.getEventType()) {
        case CREATE: path = ((Event.CreateEvent) e).getPath(); structural = true; break;
        case CLOSE: path = ((Event.CloseEvent) e).getPath(); break;
        case APPEND: path = ((Event.AppendEvent) e).getPath(); break;
        case TRUNCATE: path = ((Event.TruncateEvent) e).getPath(); break;
        case METADATA: path = ((Event.MetadataUpdateEvent) e).getPath(); break;
        case UNLINK: path = ((Event.UnlinkEvent) e).getPath(); structural = true; break;
        case RENAME:
          path = ((Event.RenameEvent) e).getSrcPath();
          dst = ((Event.RenameEvent) e).getDstPath();
          structural = true;
          break;
        default: return 1; // an event type this reader does not know: it counts
      }
      for (String p : new String[] {path, dst}) {
        int r = rel(p, root);
        if (r == 1 || (r == 2 && structural)) {
          best = 1;
        }
      }
    }
    return best;
  }

  static String json(Event e, long txid) {
    StringBuilder b = new StringBuilder("{\"e\": ").append(q(e.getEventType().name())).append(", \"txid\": ")
        .append(txid);
    switch (e.getEventType()) {
      case CREATE: {
        Event.CreateEvent c = (Event.CreateEvent) e;
        b.append(", \"path\": ").append(q(c.getPath())).append(", \"mtime\": ").append(c.getCtime())
            .append(", \"inode\": ").append(q(c.getiNodeType().name())).append(", \"overwrite\": ")
            .append(c.getOverwrite());
        break;
      }
      case CLOSE: {
        Event.CloseEvent c = (Event.CloseEvent) e;
        b.append(", \"path\": ").append(q(c.getPath())).append(", \"size\": ").append(c.getFileSize())
            .append(", \"mtime\": ").append(c.getTimestamp());
        break;
      }
      case APPEND: b.append(", \"path\": ").append(q(((Event.AppendEvent) e).getPath())); break;
      case TRUNCATE: {
        Event.TruncateEvent t = (Event.TruncateEvent) e;
        b.append(", \"path\": ").append(q(t.getPath())).append(", \"size\": ").append(t.getFileSize())
            .append(", \"mtime\": ").append(t.getTimestamp());
        break;
      }
      case METADATA: {
        Event.MetadataUpdateEvent m = (Event.MetadataUpdateEvent) e;
        b.append(", \"path\": ").append(q(m.getPath())).append(", \"meta\": ").append(q(m.getMetadataType().name()))
            .append(", \"mtime\": ").append(m.getMtime()).append(", \"atime\": ").append(m.getAtime());
        break;
      }
      case UNLINK: {
        Event.UnlinkEvent u = (Event.UnlinkEvent) e;
        b.append(", \"path\": ").append(q(u.getPath())).append(", \"mtime\": ").append(u.getTimestamp());
        break;
      }
      case RENAME: {
        Event.RenameEvent r = (Event.RenameEvent) e;
        b.append(", \"path\": ").append(q(r.getSrcPath())).append(", \"dst\": ").append(q(r.getDstPath()))
            .append(", \"mtime\": ").append(r.getTimestamp());
        break;
      }
      default: break;
    }
    return b.append('}').toString();
  }

  static void fail(PrintStream out, String kind, String msg) {
    out.println("{\"error\": " + q(msg) + ", \"kind\": " + q(kind) + "}");
    out.flush();
    System.exit(2);
  }

  public static void main(String[] args) throws Exception {
    PrintStream out = new PrintStream(System.out, false, StandardCharsets.UTF_8.name());
    Configuration conf = new HdfsConfiguration();
    conf.setInt("ipc.client.connect.max.retries", 2);
    conf.setInt("ipc.client.connect.max.retries.on.timeouts", 2);
    Action action;
    if (args.length == 2 && args[0].equals("--roll")) {
      String nn = args[1];
      action = () -> roll(out, conf, nn);
    } else {
      if (args.length < 6) {
        fail(out, "other", "usage: HdfsEdits RPC_HOST:PORT AFTER_TXID TO_TXID MAX_EVENTS MAX_SECONDS ROOT... | "
            + "HdfsEdits --roll RPC_HOST:PORT");
      }
      String nn = args[0];
      long after = Long.parseLong(args[1]);
      long to = Long.parseLong(args[2]);
      long maxEvents = Long.parseLong(args[3]);
      long deadline = System.nanoTime() + (long) (Double.parseDouble(args[4]) * 1e9);
      List<String> roots = new ArrayList<>();
      for (int i = 5; i < args.length; i++) {
        String r = args[i];
        roots.add(r.length() > 1 && r.endsWith("/") ? r.substring(0, r.length() - 1) : r);
      }
      action = () -> read(out, conf, nn, after, to, maxEvents, deadline, roots, args[4]);
    }
    String principal = System.getProperty("drt.kerberos.principal", "");
    String keytab = System.getProperty("drt.kerberos.keytab", "");
    String ccache = System.getProperty("drt.kerberos.ccache", "");
    if (principal.isEmpty() && ccache.isEmpty()) {
      action.run();
      return;
    }
    conf.set("hadoop.security.authentication", "kerberos");
    if (conf.get("dfs.namenode.kerberos.principal", "").isEmpty()) {
      fail(out, "kerberos", "the NameNode's Kerberos principal is not configured (dfs.namenode.kerberos.principal: "
          + "put the cluster's Hadoop configuration directory on $DRT_HADOOP_CLASSPATH)");
    }
    UserGroupInformation ugi;
    try {
      UserGroupInformation.setConfiguration(conf);
      if (!keytab.isEmpty()) {
        UserGroupInformation.loginUserFromKeytab(principal, keytab);
        ugi = UserGroupInformation.getLoginUser();
      } else {
        ugi = UserGroupInformation.getUGIFromTicketCache(ccache, principal.isEmpty() ? null : principal);
      }
    } catch (java.io.IOException | RuntimeException e) {
      fail(out, "kerberos", "Kerberos login as " + (principal.isEmpty() ? "the ticket cache's principal" : principal)
          + " failed: " + e.getClass().getSimpleName() + ": "
          + firstLine(e.getMessage()));
      return;
    }
    ugi.doAs((PrivilegedExceptionAction<Void>) () -> {
      action.run();
      return null;
    });
  }

  /** What one run of the tool does (a read, or a roll), as the logged-in user. */
  interface Action {
    void run() throws Exception;
  }

  /** What to do with the NameNode's RPC proxy. */
  interface Call {
    void run(ClientProtocol namenode) throws Exception;
  }

  /** {@code call} on the NameNode at {@code nn}; its failures printed as one error line (exit 2). */
  static void withNameNode(PrintStream out, Configuration conf, String nn, String what, Call call) throws Exception {
    try (FileSystem fs = FileSystem.newInstance(new URI("hdfs://" + nn), conf)) {
      call.run(((DistributedFileSystem) fs).getClient().getNamenode());
    } catch (org.apache.hadoop.security.AccessControlException e) {
      fail(out, "superuser", what + " needs the HDFS superuser: " + firstLine(e.getMessage()));
    } catch (org.apache.hadoop.ipc.RemoteException e) {
      String cls = e.getClassName();
      String kind = cls.endsWith("AccessControlException") ? "superuser"
          : cls.endsWith("StandbyException") ? "standby" : "other";
      fail(out, kind, (kind.equals("superuser") ? what + " needs the HDFS superuser: " : "")
          + cls.substring(cls.lastIndexOf('.') + 1) + ": " + firstLine(e.getMessage()));
    } catch (java.io.IOException e) {
      String text = e.getClass().getSimpleName() + ": " + firstLine(e.getMessage());
      boolean sasl = text.contains("GSS initiate failed") || text.contains("Client cannot authenticate via")
          || text.contains("SaslException") || text.contains("Failed to find any Kerberos tgt");
      fail(out, sasl ? "kerberos" : "other", text);
    }
  }

  /** The NameNode rolls its edit log; prints the first txid of the new segment. */
  static void roll(PrintStream out, Configuration conf, String nn) throws Exception {
    withNameNode(out, conf, nn, "rolling the edit log", namenode -> {
      long segment = namenode.rollEdits();
      out.println("{\"rolled\": " + segment + "}");
      out.flush();
    });
  }

  static void read(PrintStream out, Configuration conf, String nn, long after, long to, long maxEvents,
                   long deadline, List<String> roots, String seconds) throws Exception {
    withNameNode(out, conf, nn, "reading the edit log",
        namenode -> readFrom(out, namenode, after, to, maxEvents, deadline, roots, seconds));
  }

  static void readFrom(PrintStream out, ClientProtocol namenode, long after, long to, long maxEvents,
                       long deadline, List<String> roots, String seconds) throws Exception {
    long read = 0, touched = 0, atimeOnly = 0, last = after;
    boolean over = false;
    int idle = 0;
    while (last < to) {
      if (System.nanoTime() > deadline) {
        fail(out, "bound", "the edits after txid " + last + " up to " + to + " were not read within "
            + seconds + " s");
      }
      EventBatchList el = namenode.getEditsFromTxid(last + 1);
      if (el.getLastTxid() == -1) {
        // nothing readable yet past `last` (the NameNode reads up to its synced txid): wait a little
        if (++idle > 200) {
          fail(out, "missing", "the NameNode answered no edits after txid " + last + " (its synced txid "
              + el.getSyncTxid() + ", wanted " + to + ")");
        }
        Thread.sleep(25);
        continue;
      }
      idle = 0;
      if (el.getFirstTxid() != last + 1) {
        fail(out, "missing", "the NameNode's edit log no longer holds txid " + (last + 1)
            + " (it starts at " + el.getFirstTxid() + ": purged after a checkpoint)");
      }
      for (EventBatch batch : el.getBatches()) {
        for (Event e : batch.getEvents()) {
          read++;
          if (touches(e, roots) == 0) {
            continue;
          }
          if (e.getEventType() == Event.EventType.METADATA
              && ((Event.MetadataUpdateEvent) e).getMetadataType() == Event.MetadataUpdateEvent.MetadataType.TIMES
              && ((Event.MetadataUpdateEvent) e).getMtime() < 0) {
            atimeOnly++; // a read's access-time update (dfs.namenode.accesstime.precision): not a change
            continue;
          }
          touched++;
          if (touched <= maxEvents) {
            out.println(json(e, batch.getTxid()));
          } else {
            over = true;
          }
        }
      }
      last = el.getLastTxid();
      if (over) {
        break;
      }
    }
    out.println("{\"done\": true, \"read_to\": " + last + ", \"events\": " + read + ", \"touched\": " + touched
        + ", \"atime_only\": " + atimeOnly + ", \"over\": " + over + "}");
    out.flush();
  }

  static String firstLine(String s) {
    if (s == null) {
      return "";
    }
    int i = s.indexOf('\n');
    return i < 0 ? s : s.substring(0, i);
  }
}
