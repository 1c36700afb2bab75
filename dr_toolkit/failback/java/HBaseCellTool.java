package org.drtoolkit.failback;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hbase.Cell;
import org.apache.hadoop.hbase.CellUtil;
import org.apache.hadoop.hbase.HBaseConfiguration;
import org.apache.hadoop.hbase.HConstants;
import org.apache.hadoop.hbase.NamespaceDescriptor;
import org.apache.hadoop.hbase.NamespaceNotFoundException;
import org.apache.hadoop.hbase.TableExistsException;
import org.apache.hadoop.hbase.TableName;
import org.apache.hadoop.hbase.client.Admin;
import org.apache.hadoop.hbase.client.BufferedMutator;
import org.apache.hadoop.hbase.client.ColumnFamilyDescriptor;
import org.apache.hadoop.hbase.client.ColumnFamilyDescriptorBuilder;
import org.apache.hadoop.hbase.client.Connection;
import org.apache.hadoop.hbase.client.ConnectionFactory;
import org.apache.hadoop.hbase.client.Delete;
import org.apache.hadoop.hbase.client.Get;
import org.apache.hadoop.hbase.client.Mutation;
import org.apache.hadoop.hbase.client.Put;
import org.apache.hadoop.hbase.client.Result;
import org.apache.hadoop.hbase.client.ResultScanner;
import org.apache.hadoop.hbase.client.Scan;
import org.apache.hadoop.hbase.client.Table;
import org.apache.hadoop.hbase.client.TableDescriptor;
import org.apache.hadoop.hbase.client.TableDescriptorBuilder;

/**
 * The cell-level reads and writes of dr-toolkit's HBase failback (dr_toolkit/failback/hbase.py),
 * run through the cluster's own {@code hbase} command ({@code HBASE_CLASSPATH=<jar> hbase
 * org.drtoolkit.failback.HBaseCellTool ...}) with HBase's client API. Clusters are named by their
 * cluster key ({@code host1,host2:port:/parent}), as CopyTable's {@code --peer.adr}.
 *
 * <p>A cell is one line, tab-separated: row, family, qualifier (hex), timestamp (ms), type (Put,
 * Delete, DeleteColumn, DeleteFamily, DeleteFamilyVersion), value (hex). Output lines this tool
 * writes start with {@code C\t} (a cell), {@code F\t} (a family and its scope) or {@code R\t}
 * (the result); anything else on stdout is a library's log line.
 *
 * <pre>
 * families KEY TABLE                       F  family scope  (R missing when the table does not exist)
 * scan KEY TABLE START END [visible]       every cell (raw: delete markers too, all versions) in [START, END);
 *                                          visible: the versions a reader sees
 * diff KEY OTHER TABLE START END           the cells of KEY in [START, END) that OTHER lacks (same coordinates,
 *                                          timestamp, type and value): the visible versions and the markers
 * put KEY TABLE < cells                    write the cells as they are (timestamps kept; markers as markers)
 * delete KEY TABLE < cells                 delete exactly those versions (a Put cell: its version only)
 * copy KEY TABLE OTHER TABLE2 START END    every cell of KEY:TABLE in [START, END) written to OTHER:TABLE2
 * rows KEY TABLE OTHER TABLE2 < cells      every cell (raw, all time) of the rows named, from KEY to OTHER
 * aside KEY TABLE NEWTABLE                 create NEWTABLE like TABLE (its families, every version kept,
 *                                          REPLICATION_SCOPE 0); nothing when it exists
 * </pre>
 */
public final class HBaseCellTool {
  private static final int BATCH = 500;

  private HBaseCellTool() {
  }

  static Configuration conf(String key) {
    Configuration conf = HBaseConfiguration.create();
    int a = key.indexOf(':');
    int b = key.indexOf(':', a + 1);
    conf.set(HConstants.ZOOKEEPER_QUORUM, key.substring(0, a));
    conf.set(HConstants.ZOOKEEPER_CLIENT_PORT, key.substring(a + 1, b));
    conf.set(HConstants.ZOOKEEPER_ZNODE_PARENT, key.substring(b + 1));
    conf.setInt("hbase.client.retries.number", 10);
    conf.setInt("hbase.client.operation.timeout", 120000);
    return conf;
  }

  static String hex(byte[] b, int off, int len) {
    StringBuilder sb = new StringBuilder(len * 2);
    for (int i = off; i < off + len; i++) {
      sb.append(Character.forDigit((b[i] >> 4) & 0xF, 16)).append(Character.forDigit(b[i] & 0xF, 16));
    }
    return sb.toString();
  }

  static byte[] unhex(String s) {
    byte[] out = new byte[s.length() / 2];
    for (int i = 0; i < out.length; i++) {
      out[i] = (byte) Integer.parseInt(s.substring(2 * i, 2 * i + 2), 16);
    }
    return out;
  }

  static String line(Cell c) {
    return hex(c.getRowArray(), c.getRowOffset(), c.getRowLength()) + "\t"
        + hex(c.getFamilyArray(), c.getFamilyOffset(), c.getFamilyLength()) + "\t"
        + hex(c.getQualifierArray(), c.getQualifierOffset(), c.getQualifierLength()) + "\t"
        + c.getTimestamp() + "\t" + c.getType().name() + "\t"
        + hex(c.getValueArray(), c.getValueOffset(), c.getValueLength());
  }

  static Scan rawScan(long start, long end) throws java.io.IOException {
    Scan s = new Scan().setRaw(true).readAllVersions().setTimeRange(start, end).setCaching(1000);
    s.setCacheBlocks(false);
    return s;
  }

  static Mutation mutation(String[] f) {
    byte[] row = unhex(f[0]);
    byte[] fam = unhex(f[1]);
    byte[] qual = unhex(f[2]);
    long ts = Long.parseLong(f[3]);
    switch (f[4]) {
      case "Put":
        return new Put(row).addColumn(fam, qual, ts, unhex(f.length > 5 ? f[5] : ""));
      case "Delete":
        return new Delete(row).addColumn(fam, qual, ts);
      case "DeleteColumn":
        return new Delete(row).addColumns(fam, qual, ts);
      case "DeleteFamily":
        return new Delete(row).addFamily(fam, ts);
      case "DeleteFamilyVersion":
        return new Delete(row).addFamilyVersion(fam, ts);
      default:
        throw new IllegalArgumentException("unknown cell type " + f[4]);
    }
  }

  static List<String[]> readCells() throws java.io.IOException {
    List<String[]> out = new ArrayList<>();
    BufferedReader r = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    String ln;
    while ((ln = r.readLine()) != null) {
      if (!ln.isEmpty()) {
        out.add(ln.split("\t", -1));
      }
    }
    return out;
  }

  /** Does {@code other} hold exactly this cell (coordinates, timestamp, type, value)? */
  static boolean holds(Table other, Cell c) throws java.io.IOException {
    byte[] row = CellUtil.cloneRow(c);
    byte[] fam = CellUtil.cloneFamily(c);
    byte[] qual = CellUtil.cloneQualifier(c);
    if (c.getType() == Cell.Type.Put) {
      Result r = other.get(new Get(row).addColumn(fam, qual).setTimestamp(c.getTimestamp()));
      Cell o = r.getColumnLatestCell(fam, qual);
      return o != null && o.getTimestamp() == c.getTimestamp() && CellUtil.matchingValue(o, c);
    }
    Scan s = rawScan(c.getTimestamp(), c.getTimestamp() + 1).withStartRow(row).withStopRow(row, true)
        .addFamily(fam);
    try (ResultScanner sc = other.getScanner(s)) {
      for (Result r : sc) {
        for (Cell o : r.rawCells()) {
          if (o.getType() == c.getType() && CellUtil.matchingQualifier(o, c)) {
            return true;
          }
        }
      }
    }
    return false;
  }

  static void write(Connection conn, String table, List<String[]> cells) throws java.io.IOException {
    try (BufferedMutator m = conn.getBufferedMutator(TableName.valueOf(table))) {
      for (String[] f : cells) {
        m.mutate(mutation(f));
      }
      m.flush();
    }
  }

  public static void main(String[] args) throws Exception {
    String cmd = args[0];
    try (Connection conn = ConnectionFactory.createConnection(conf(args[1]))) {
      switch (cmd) {
        case "families": {
          try (Admin admin = conn.getAdmin()) {
            TableName tn = TableName.valueOf(args[2]);
            if (!admin.tableExists(tn)) {
              System.out.println("R\tmissing");
              break;
            }
            for (ColumnFamilyDescriptor cf : admin.getDescriptor(tn).getColumnFamilies()) {
              System.out.println("F\t" + cf.getNameAsString() + "\t" + cf.getScope());
            }
            System.out.println("R\tok");
          }
          break;
        }
        case "scan": {
          long n = 0;
          Scan scan = rawScan(Long.parseLong(args[3]), Long.parseLong(args[4]));
          if (args.length > 5 && args[5].equals("visible")) {
            scan.setRaw(false);  // what a reader sees: every version a delete does not hide
          }
          try (Table t = conn.getTable(TableName.valueOf(args[2])); ResultScanner sc = t.getScanner(scan)) {
            for (Result r : sc) {
              for (Cell c : r.rawCells()) {
                System.out.println("C\t" + line(c));
                n++;
              }
            }
          }
          System.out.println("R\t" + n);
          break;
        }
        case "diff": {
          // the versions a reader of KEY sees (a version delete hides its Put, even before a compaction
          // removes it) and, read raw, the delete markers: those OTHER does not hold
          long seen = 0;
          long diverged = 0;
          long start = Long.parseLong(args[4]);
          long end = Long.parseLong(args[5]);
          try (Connection oc = ConnectionFactory.createConnection(conf(args[2]));
              Table t = conn.getTable(TableName.valueOf(args[3]));
              Table other = oc.getTable(TableName.valueOf(args[3]))) {
            for (boolean raw : new boolean[] {false, true}) {
              Scan scan = rawScan(start, end);
              scan.setRaw(raw);
              try (ResultScanner sc = t.getScanner(scan)) {
                for (Result r : sc) {
                  for (Cell c : r.rawCells()) {
                    if (raw == (c.getType() == Cell.Type.Put)) {
                      continue;  // Puts from the plain read, markers from the raw one
                    }
                    seen++;
                    if (!holds(other, c)) {
                      System.out.println("C\t" + line(c));
                      diverged++;
                    }
                  }
                }
              }
            }
          }
          System.out.println("R\t" + seen + "\t" + diverged);
          break;
        }
        case "put": {
          List<String[]> cells = readCells();
          write(conn, args[2], cells);
          System.out.println("R\t" + cells.size());
          break;
        }
        case "delete": {
          List<String[]> cells = readCells();
          try (BufferedMutator m = conn.getBufferedMutator(TableName.valueOf(args[2]))) {
            for (String[] f : cells) {
              if (f[4].equals("Put")) {
                m.mutate(new Delete(unhex(f[0])).addColumn(unhex(f[1]), unhex(f[2]), Long.parseLong(f[3])));
              }
            }
            m.flush();
          }
          System.out.println("R\t" + cells.size());
          break;
        }
        case "copy": {
          long n = 0;
          try (Connection oc = ConnectionFactory.createConnection(conf(args[3]));
              Table t = conn.getTable(TableName.valueOf(args[2]));
              BufferedMutator m = oc.getBufferedMutator(TableName.valueOf(args[4]));
              ResultScanner sc = t.getScanner(rawScan(Long.parseLong(args[5]), Long.parseLong(args[6])))) {
            for (Result r : sc) {
              for (Cell c : r.rawCells()) {
                m.mutate(mutation(line(c).split("\t", -1)));
                n++;
                if (n % BATCH == 0) {
                  m.flush();
                }
              }
            }
            m.flush();
          }
          System.out.println("R\t" + n);
          break;
        }
        case "rows": {
          // every cell (raw, all time) of the rows the cells on stdin name, from KEY:TABLE to OTHER:TABLE2
          java.util.TreeSet<String> rows = new java.util.TreeSet<>();
          for (String[] f : readCells()) {
            rows.add(f[0]);
          }
          long n = 0;
          try (Connection oc = ConnectionFactory.createConnection(conf(args[3]));
              Table t = conn.getTable(TableName.valueOf(args[2]));
              BufferedMutator m = oc.getBufferedMutator(TableName.valueOf(args[4]))) {
            for (String row : rows) {
              byte[] key = unhex(row);
              Scan scan = rawScan(0, Long.MAX_VALUE).withStartRow(key).withStopRow(key, true);
              try (ResultScanner sc = t.getScanner(scan)) {
                for (Result r : sc) {
                  for (Cell c : r.rawCells()) {
                    m.mutate(mutation(line(c).split("\t", -1)));
                    n++;
                  }
                }
              }
            }
            m.flush();
          }
          System.out.println("R\t" + n + "\t" + rows.size());
          break;
        }
        case "aside": {
          try (Admin admin = conn.getAdmin()) {
            TableName src = TableName.valueOf(args[2]);
            TableName dst = TableName.valueOf(args[3]);
            if (admin.tableExists(dst)) {
              System.out.println("R\texists");
              break;
            }
            String ns = dst.getNamespaceAsString();
            try {
              admin.getNamespaceDescriptor(ns);
            } catch (NamespaceNotFoundException e) {
              admin.createNamespace(NamespaceDescriptor.create(ns).build());
            }
            TableDescriptorBuilder b = TableDescriptorBuilder.newBuilder(dst);
            for (ColumnFamilyDescriptor cf : admin.getDescriptor(src).getColumnFamilies()) {
              b.setColumnFamily(ColumnFamilyDescriptorBuilder.newBuilder(cf.getName())
                  .setMaxVersions(Integer.MAX_VALUE).setScope(0).setTimeToLive(HConstants.FOREVER)
                  .setKeepDeletedCells(org.apache.hadoop.hbase.KeepDeletedCells.TRUE).build());
            }
            TableDescriptor d = b.build();
            try {
              admin.createTable(d);
              System.out.println("R\tcreated");
            } catch (TableExistsException e) {
              System.out.println("R\texists");
            }
          }
          break;
        }
        default:
          System.out.println("R\terror unknown command " + cmd);
          System.exit(2);
      }
    } catch (Exception e) {
      String msg = String.valueOf(e).replace('\n', ' ');
      System.out.println("E\t" + msg);
      System.out.flush();
      System.exit(1);
    }
    System.out.flush();
    System.exit(0);
  }
}
