package org.drtoolkit.verify;

import java.io.IOException;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.Arrays;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hbase.Cell;
import org.apache.hadoop.hbase.CellUtil;
import org.apache.hadoop.hbase.HBaseConfiguration;
import org.apache.hadoop.hbase.TableName;
import org.apache.hadoop.hbase.client.Admin;
import org.apache.hadoop.hbase.client.ColumnFamilyDescriptor;
import org.apache.hadoop.hbase.client.Connection;
import org.apache.hadoop.hbase.client.ConnectionFactory;
import org.apache.hadoop.hbase.client.Result;
import org.apache.hadoop.hbase.client.Scan;
import org.apache.hadoop.hbase.client.TableDescriptor;
import org.apache.hadoop.hbase.filter.FilterList;
import org.apache.hadoop.hbase.filter.PrefixFilter;
import org.apache.hadoop.hbase.io.ImmutableBytesWritable;
import org.apache.hadoop.hbase.mapreduce.TableInputFormat;
import org.apache.hadoop.hbase.mapreduce.TableMapReduceUtil;
import org.apache.hadoop.hbase.util.Bytes;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

/**
 * dr-toolkit's reader of a real HBase table for `drt verify hbase://…` (dr_toolkit/verify/hbase.py).
 *
 * <p>The cells are read by Spark executors through HBase's own {@link TableInputFormat} (one Spark
 * partition per region, each a client scan of its region server), with the Scan that HBase's
 * VerifyReplication builds from the same options: time range [start, end), families, row prefixes
 * (a FilterList of PrefixFilters, MUST_PASS_ONE, start/stop rows from the smallest and largest
 * prefix), max versions, raw (delete markers) and block caching off. One output row per HBase row:
 * {@code row} (Bytes.toStringBinary of the key) and {@code cells}, the row's cells in HBase's order,
 * each (family, qualifier, ts, type, value) — the five things Result.compareResults compares
 * (texts are Bytes.toStringBinary: exact and readable), and {@code h}, {@code c}: the row's digest
 * computed here from the raw bytes (see {@link #digest}). The JVM does the reading and the hashing;
 * Python sees only the DataFrame.
 */
public final class HBaseCells {
  private HBaseCells() {
  }

  /** The client configuration for a cluster: quorum "h1:p1,h2:p2" and znode parent, short retries. */
  public static Configuration conf(String quorum, String parent, int timeoutMs) {
    Configuration c = HBaseConfiguration.create();
    c.set("hbase.zookeeper.quorum", quorum);
    c.set("zookeeper.znode.parent", parent);
    c.setInt("zookeeper.recovery.retry", 1);
    c.setInt("zookeeper.recovery.retry.intervalmill", 200);
    c.setInt("zookeeper.session.timeout", timeoutMs);
    c.setInt("hbase.client.retries.number", 3);
    c.setInt("hbase.client.pause", 200);
    c.setInt("hbase.rpc.timeout", timeoutMs);
    c.setInt("hbase.client.operation.timeout", timeoutMs * 2);
    c.setInt("hbase.client.meta.operation.timeout", timeoutMs * 2);
    c.setInt("hbase.client.scanner.timeout.period", Math.max(60000, timeoutMs));
    return c;
  }

  /**
   * What the table looks like: "missing", or "ok" then the family names, tab-separated. An
   * unreachable cluster throws (the caller turns it into exit 3).
   */
  public static String describe(String quorum, String parent, String table, int timeoutMs) throws IOException {
    try (Connection conn = ConnectionFactory.createConnection(conf(quorum, parent, timeoutMs));
         Admin admin = conn.getAdmin()) {
      TableName tn = TableName.valueOf(table);
      if (!admin.tableExists(tn)) {
        return "missing";
      }
      TableDescriptor d = admin.getDescriptor(tn);
      StringBuilder sb = new StringBuilder("ok");
      for (ColumnFamilyDescriptor f : d.getColumnFamilies()) {
        sb.append('\t').append(f.getNameAsString());
      }
      return sb.toString();
    }
  }

  /** VerifyReplication's Scan for these options (start/end in ms, versions &lt; 0: the default 1). */
  public static Scan scan(String families, String rowPrefixes, long start, long end, int versions, boolean raw,
                          int caching) throws IOException {
    Scan scan = new Scan();
    scan.setTimeRange(start, end);
    scan.setRaw(raw);
    scan.setCacheBlocks(false);
    scan.setCaching(caching);
    if (versions >= 0) {
      scan.readVersions(versions);
    }
    if (families != null && !families.isEmpty()) {
      for (String fam : families.split(",")) {
        scan.addFamily(Bytes.toBytes(fam));
      }
    }
    if (rowPrefixes != null && !rowPrefixes.isEmpty()) {
      String[] prefixes = rowPrefixes.split(",");
      Arrays.sort(prefixes);
      FilterList list = new FilterList(FilterList.Operator.MUST_PASS_ONE);
      for (String p : prefixes) {
        list.addFilter(new PrefixFilter(Bytes.toBytes(p)));
      }
      scan.setFilter(list);
      byte[] first = Bytes.toBytes(prefixes[0]);
      byte[] last = Bytes.toBytes(prefixes[prefixes.length - 1]);
      scan.withStartRow(first);
      scan.withStopRow(Bytes.add(Bytes.head(last, last.length - 1),
          new byte[] {(byte) (last[last.length - 1] + 1)}));
    }
    return scan;
  }

  public static StructType schema() {
    StructType cell = DataTypes.createStructType(new StructField[] {
        DataTypes.createStructField("family", DataTypes.StringType, false),
        DataTypes.createStructField("qualifier", DataTypes.StringType, false),
        DataTypes.createStructField("ts", DataTypes.LongType, false),
        DataTypes.createStructField("type", DataTypes.StringType, false),
        DataTypes.createStructField("value", DataTypes.StringType, false)});
    return DataTypes.createStructType(new StructField[] {
        DataTypes.createStructField("row", DataTypes.StringType, false),
        DataTypes.createStructField("cells", DataTypes.createArrayType(cell, false), false),
        DataTypes.createStructField("h", DataTypes.LongType, false),
        DataTypes.createStructField("c", DataTypes.LongType, false)});
  }

  private static void put(MessageDigest md, byte[] a, int off, int len) {
    md.update(new byte[] {(byte) (len >>> 24), (byte) (len >>> 16), (byte) (len >>> 8), (byte) len});
    md.update(a, off, len);
  }

  /**
   * The row's digest: MD5 of an unambiguous encoding (every field length-prefixed) of the row key and,
   * cell by cell, family, qualifier, timestamp, type and value. {@code h} = its first 8 bytes (a
   * long), {@code c} = the next 4 (unsigned): the two hashes the verifyrep pipeline folds per bucket.
   */
  static long[] digest(Result r) {
    MessageDigest md;
    try {
      md = MessageDigest.getInstance("MD5");
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
    byte[] row = r.getRow();
    put(md, row, 0, row.length);
    for (Cell c : r.rawCells()) {
      put(md, c.getFamilyArray(), c.getFamilyOffset(), c.getFamilyLength());
      put(md, c.getQualifierArray(), c.getQualifierOffset(), c.getQualifierLength());
      md.update(Bytes.toBytes(c.getTimestamp()));
      md.update(c.getTypeByte());
      put(md, c.getValueArray(), c.getValueOffset(), c.getValueLength());
    }
    byte[] d = md.digest();
    long h = Bytes.toLong(d, 0);
    long low = Bytes.toInt(d, 8) & 0xFFFFFFFFL;
    return new long[] {h, low};
  }

  static Row toRow(Result r) {
    Cell[] cells = r.rawCells();
    Row[] out = new Row[cells.length];
    for (int i = 0; i < cells.length; i++) {
      Cell c = cells[i];
      out[i] = (RowFactory.create(
          Bytes.toStringBinary(c.getFamilyArray(), c.getFamilyOffset(), c.getFamilyLength()),
          Bytes.toStringBinary(c.getQualifierArray(), c.getQualifierOffset(), c.getQualifierLength()),
          c.getTimestamp(), c.getType().name(),
          Bytes.toStringBinary(c.getValueArray(), c.getValueOffset(), c.getValueLength())));
    }
    long[] d = digest(r);
    return RowFactory.create(Bytes.toStringBinary(r.getRow()), (Object) out, d[0], d[1]);
  }

  /** The table's rows as a DataFrame (row, cells), read region-parallel by Spark's executors. */
  public static Dataset<Row> read(SparkSession spark, String quorum, String parent, String table, String families,
                                  String rowPrefixes, long start, long end, int versions, boolean raw, int caching,
                                  int timeoutMs) throws IOException {
    Configuration c = conf(quorum, parent, timeoutMs);
    c.set(TableInputFormat.INPUT_TABLE, table);
    c.set(TableInputFormat.SCAN,
        TableMapReduceUtil.convertScanToString(scan(families, rowPrefixes, start, end, versions, raw, caching)));
    JavaSparkContext jsc = JavaSparkContext.fromSparkContext(spark.sparkContext());
    JavaRDD<Row> rows = jsc.newAPIHadoopRDD(c, TableInputFormat.class, ImmutableBytesWritable.class, Result.class)
        .map(t -> toRow(t._2()));
    return spark.createDataFrame(rows, schema());
  }

  /** How many regions the table has (= Spark partitions of {@link #read}). */
  public static int regions(String quorum, String parent, String table, int timeoutMs) throws IOException {
    try (Connection conn = ConnectionFactory.createConnection(conf(quorum, parent, timeoutMs));
         Admin admin = conn.getAdmin()) {
      return admin.getRegions(TableName.valueOf(table)).size();
    }
  }

  static {
    // CellUtil is referenced so a classpath without hbase-common fails here, naming the class
    CellUtil.class.getName();
  }
}
