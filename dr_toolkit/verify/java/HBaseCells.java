package org.drtoolkit.verify;

import java.io.IOException;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
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
import org.apache.hadoop.hbase.filter.MultiRowRangeFilter;
import org.apache.hadoop.hbase.filter.PrefixFilter;
import org.apache.hadoop.hbase.io.ImmutableBytesWritable;
import org.apache.hadoop.hbase.mapreduce.TableInputFormat;
import org.apache.hadoop.hbase.mapreduce.TableMapReduceUtil;
import org.apache.hadoop.hbase.mapreduce.TableSnapshotInputFormat;
import org.apache.hadoop.hbase.mapreduce.TableSplit;
import org.apache.hadoop.hbase.util.Bytes;
import org.apache.hadoop.io.DataInputBuffer;
import org.apache.hadoop.io.DataOutputBuffer;
import org.apache.hadoop.mapreduce.InputSplit;
import org.apache.hadoop.mapreduce.Job;
import org.apache.hadoop.mapreduce.JobContext;
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
 * {@code row} (Bytes.toStringBinary of the key), {@code cells}: the row's cells in HBase's order as one
 * byte string (family, qualifier, timestamp, type, value of each — the five things
 * Result.compareResults compares — raw, see {@link #encodeCells}), and {@code h}, {@code c}: the row's
 * digest computed here from the same bytes (see {@link #digest}). The JVM does the reading and the
 * hashing; Python decodes the cells only of the rows a report shows.
 */
public final class HBaseCells {
  private HBaseCells() {
  }

  private static String serverPrincipal;

  /**
   * Kerberos for every later client of this JVM (a secure HBase): the process logs in from
   * {@code keytab} as {@code principal} (Hadoop's UserGroupInformation, as {@code hbase shell}
   * with a keytab does), and the clients authenticate their RPCs with SASL/GSSAPI to servers named
   * {@code server} ({@code hbase/_HOST@REALM}: hbase.master/regionserver.kerberos.principal).
   * {@code krb5Conf}: the realm's krb5.conf (empty: the JVM's default). Idempotent per principal.
   */
  public static synchronized void kerberos(String principal, String keytab, String server, String krb5Conf)
      throws IOException {
    if (krb5Conf != null && !krb5Conf.isEmpty()) {
      System.setProperty("java.security.krb5.conf", krb5Conf);
    }
    serverPrincipal = server;
    Configuration c = HBaseConfiguration.create();
    secure(c);
    org.apache.hadoop.security.UserGroupInformation.setConfiguration(c);
    org.apache.hadoop.security.UserGroupInformation me = org.apache.hadoop.security.UserGroupInformation.getLoginUser();
    if (!me.hasKerberosCredentials() || !principal.equals(me.getUserName())) {
      org.apache.hadoop.security.UserGroupInformation.loginUserFromKeytab(principal, keytab);
    }
  }

  private static void secure(Configuration c) {
    if (serverPrincipal != null) {
      c.set("hbase.security.authentication", "kerberos");
      c.set("hadoop.security.authentication", "kerberos");
      c.set("hbase.master.kerberos.principal", serverPrincipal);
      c.set("hbase.regionserver.kerberos.principal", serverPrincipal);
    }
  }

  /** The client configuration for a cluster: quorum "h1:p1,h2:p2" and znode parent, short retries. */
  public static Configuration conf(String quorum, String parent, int timeoutMs) {
    Configuration c = HBaseConfiguration.create();
    secure(c);
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
    return DataTypes.createStructType(new StructField[] {
        DataTypes.createStructField("row", DataTypes.StringType, false),
        DataTypes.createStructField("cells", DataTypes.BinaryType, false),
        DataTypes.createStructField("h", DataTypes.LongType, false),
        DataTypes.createStructField("c", DataTypes.LongType, false),
        DataTypes.createStructField("b", DataTypes.IntegerType, false)});
  }

  /** A growable byte buffer (no synchronisation, unlike ByteArrayOutputStream). */
  static final class Buf {
    byte[] b = new byte[256];
    int n;

    void ensure(int more) {
      if (n + more > b.length) {
        b = Arrays.copyOf(b, Math.max(b.length * 2, n + more));
      }
    }

    void bytes(byte[] a, int off, int len) {
      ensure(len + 4);
      b[n++] = (byte) (len >>> 24);
      b[n++] = (byte) (len >>> 16);
      b[n++] = (byte) (len >>> 8);
      b[n++] = (byte) len;
      System.arraycopy(a, off, b, n, len);
      n += len;
    }

    void putLong(long v) {
      ensure(8);
      for (int i = 7; i >= 0; i--) {
        b[n++] = (byte) (v >>> (8 * i));
      }
    }

    void putByte(byte v) {
      ensure(1);
      b[n++] = v;
    }
  }

  /**
   * The row's cells as one byte string: cell by cell, in HBase's order, family, qualifier (each a 4-byte
   * big-endian length then the bytes), timestamp (8 bytes), type (KeyValue's type byte), value
   * (length-prefixed) — everything Result.compareResults compares, raw. Decoded only for the rows a
   * report shows (dr_toolkit/verify/hbase.py: decode_cells).
   */
  static byte[] encodeCells(Result r) {
    Buf buf = new Buf();
    for (Cell c : r.rawCells()) {
      buf.bytes(c.getFamilyArray(), c.getFamilyOffset(), c.getFamilyLength());
      buf.bytes(c.getQualifierArray(), c.getQualifierOffset(), c.getQualifierLength());
      buf.putLong(c.getTimestamp());
      buf.putByte(c.getTypeByte());
      buf.bytes(c.getValueArray(), c.getValueOffset(), c.getValueLength());
    }
    return Arrays.copyOf(buf.b, buf.n);
  }

  /**
   * The row's digest: MD5 of the row key (length-prefixed) followed by {@link #encodeCells}, an
   * unambiguous encoding. {@code h} = its first 8 bytes (a long), {@code c} = the next 4 (unsigned):
   * the two hashes the verifyrep pipeline folds per bucket.
   */
  static long[] digest(byte[] row, byte[] cells) {
    MessageDigest md;
    try {
      md = MessageDigest.getInstance("MD5");
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
    byte[] d = md5(md, row, cells);
    long h = Bytes.toLong(d, 0);
    long low = Bytes.toInt(d, 8) & 0xFFFFFFFFL;
    return new long[] {h, low};
  }

  /** MD5 of the row key (4-byte length, then the bytes) followed by the cells' bytes. */
  static byte[] md5(MessageDigest md, byte[] row, byte[] cells) {
    md.reset();
    md.update(new byte[] {(byte) (row.length >>> 24), (byte) (row.length >>> 16), (byte) (row.length >>> 8),
        (byte) row.length});
    md.update(row);
    md.update(cells);
    return md.digest();
  }

  static Row toRow(Result r, byte[][] starts, int[] buckets) {
    byte[] row = r.getRow();
    byte[] cells = encodeCells(r);
    long[] d = digest(row, cells);
    return RowFactory.create(Bytes.toStringBinary(row), cells, d[0], d[1],
        buckets.length == 0 ? 0 : buckets[rangeOf(starts, row)]);
  }

  /**
   * The (row key, Result) pairs of the table, read region-parallel by Spark's executors: through the
   * region servers ({@link TableInputFormat}) when {@code snapshot} is empty, else from the HFiles of
   * that table snapshot ({@link TableSnapshotInputFormat}: the executors read the cluster's HDFS
   * under {@code rootDir}, restoring the snapshot's references under {@code restoreDir}; the region
   * servers serve nothing). {@code ranges} (see {@link #parseRanges}) narrows the scan to those row
   * ranges; empty: the whole table.
   */
  static JavaRDD<Result> results(SparkSession spark, String quorum, String parent, String table, String families,
                                 String rowPrefixes, long start, long end, int versions, boolean raw, int caching,
                                 int timeoutMs, String snapshot, String rootDir, String restoreDir,
                                 List<byte[][]> ranges) throws IOException {
    Configuration c = conf(quorum, parent, timeoutMs);
    Scan scan = scan(families, rowPrefixes, start, end, versions, raw, caching);
    if (!ranges.isEmpty()) {
      List<MultiRowRangeFilter.RowRange> rr = new ArrayList<>();
      for (byte[][] r : ranges) {
        rr.add(new MultiRowRangeFilter.RowRange(r[0], true, r[1], false));
      }
      MultiRowRangeFilter only = new MultiRowRangeFilter(rr);
      scan.setFilter(scan.getFilter() == null ? only
          : new FilterList(FilterList.Operator.MUST_PASS_ALL, scan.getFilter(), only));
    }
    c.set(TableInputFormat.INPUT_TABLE, table);
    c.set(TableInputFormat.SCAN, TableMapReduceUtil.convertScanToString(scan));
    JavaSparkContext jsc = JavaSparkContext.fromSparkContext(spark.sparkContext());
    if (snapshot == null || snapshot.isEmpty()) {
      // The region sizes only order the splits (an RPC to every region server per table before any
      // read starts); RegionFormat gives every split a length of at least 1 instead.
      c.setBoolean("hbase.regionsizecalculator.enable", false);
      return jsc.newAPIHadoopRDD(c, RegionFormat.class, ImmutableBytesWritable.class, Result.class)
          .map(t -> t._2());
    }
    c.set("hbase.rootdir", rootDir);
    c.set("fs.defaultFS", new Path(rootDir).toUri().resolve("/").toString());
    // The region is opened here, outside a region server, whose MemStoreLAB chunk pool
    // (ChunkCreator) is never initialised: closing it then fails ("chunkCreator is null") and a
    // second close unlocks a lock it does not hold, failing the task. A read-only region has
    // an empty memstore: no LAB.
    c.setBoolean("hbase.hregion.memstore.mslab.enabled", false);
    // On by default, scan metrics make the snapshot reader update Hadoop counters after every
    // row (TableSnapshotRegionRecordReader.nextKeyValue -> updateCounters: a class-wide lock and
    // a resource-bundle lookup per row); nothing reads them here.
    c.setBoolean("hbase.TableSnapshotInputFormat.scan_metrics.enabled", false);
    Job job = Job.getInstance(c);
    TableSnapshotInputFormat.setInput(job, snapshot, new Path(restoreDir));
    return jsc.newAPIHadoopRDD(job.getConfiguration(), SnapshotFormat.class, ImmutableBytesWritable.class,
        Result.class).map(t -> t._2());
  }

  /**
   * Row ranges as the Python side passes them: {@code start:stop:bucket} triples, comma separated,
   * in key order, the keys in hex, {@code start} inclusive, {@code stop} exclusive (empty stop: to
   * the table's end), {@code bucket} the number rows in that range are given. Empty text: no ranges
   * (the whole table). Each entry: start, stop, and the bucket as 4 big-endian bytes.
   */
  static List<byte[][]> parseRanges(String text) {
    List<byte[][]> out = new ArrayList<>();
    if (text == null || text.isEmpty()) {
      return out;
    }
    for (String triple : text.split(",", -1)) {
      String[] f = triple.split(":", -1);
      out.add(new byte[][] {Bytes.fromHex(f[0]), Bytes.fromHex(f[1]), Bytes.toBytes(Integer.parseInt(f[2]))});
    }
    return out;
  }

  /**
   * The table's rows as a DataFrame (row, cells, h, c, b): see {@link #results}. {@code b} is the
   * bucket of the range of {@code ranges} the row is in (0 without ranges).
   */
  public static Dataset<Row> read(SparkSession spark, String quorum, String parent, String table, String families,
                                  String rowPrefixes, long start, long end, int versions, boolean raw, int caching,
                                  int timeoutMs, String snapshot, String rootDir, String restoreDir, String ranges)
      throws IOException {
    List<byte[][]> rr = parseRanges(ranges);
    final byte[][] starts = new byte[rr.size()][];
    final int[] buckets = new int[rr.size()];
    for (int i = 0; i < starts.length; i++) {
      starts[i] = rr.get(i)[0];
      buckets[i] = Bytes.toInt(rr.get(i)[2]);
    }
    JavaRDD<Row> rows = results(spark, quorum, parent, table, families, rowPrefixes, start, end, versions, raw,
        caching, timeoutMs, snapshot, rootDir, restoreDir, rr).map(r -> toRow(r, starts, buckets));
    return spark.createDataFrame(rows, schema());
  }

  /** The index of the last of the sorted {@code starts} at or before {@code row} (0 if none). */
  static int rangeOf(byte[][] starts, byte[] row) {
    int lo = 0;
    int hi = starts.length - 1;
    int found = 0;
    while (lo <= hi) {
      int mid = (lo + hi) >>> 1;
      if (Bytes.compareTo(starts[mid], row) <= 0) {
        found = mid;
        lo = mid + 1;
      } else {
        hi = mid - 1;
      }
    }
    return found;
  }

  public static StructType chunkSchema() {
    return DataTypes.createStructType(new StructField[] {
        DataTypes.createStructField("first", DataTypes.BinaryType, false),
        DataTypes.createStructField("boundary", DataTypes.BooleanType, false),
        DataTypes.createStructField("n", DataTypes.LongType, false),
        DataTypes.createStructField("h1", DataTypes.LongType, false),
        DataTypes.createStructField("h2", DataTypes.LongType, false)});
  }

  /**
   * Whether {@code row} starts a chunk: a hash of the key alone (never of the cells) has its low
   * {@code bits} bits zero, so the same key is a boundary on both clusters whatever their regions,
   * and a chunk holds 2^bits rows on average.
   */
  static boolean isBoundary(byte[] row, int bits) {
    long h = 0x9E3779B97F4A7C15L;
    for (byte x : row) {
      h = (h ^ (x & 0xFF)) * 0x100000001B3L;
    }
    h ^= h >>> 33;
    h *= 0xFF51AFD7ED558CCDL;
    h ^= h >>> 33;
    h *= 0xC4CEB93FE51A7AF5L;
    h ^= h >>> 33;
    return (h & ((1L << bits) - 1)) == 0;
  }

  /**
   * The table as chunk digests, not rows: each Spark partition (a region) folds its rows, in key
   * order, into one record per run of rows between boundary keys ({@link #isBoundary}) — the run's
   * first key, whether that key is a boundary (a region's first run may start mid-chunk), how many
   * rows, and the sums (mod 2^64) of the two halves of each row's MD5 over the row key and every
   * cell ({@link #digest}'s bytes). The sums do not depend on the order they are added in, so the
   * driver joins a chunk cut by a region end by adding its parts. Same scan, same cells, as
   * {@link #read}.
   */
  public static Dataset<Row> chunks(SparkSession spark, String quorum, String parent, String table, String families,
                                    String rowPrefixes, long start, long end, int versions, boolean raw, int caching,
                                    int timeoutMs, String snapshot, String rootDir, String restoreDir, int bits)
      throws IOException {
    JavaRDD<Row> out = results(spark, quorum, parent, table, families, rowPrefixes, start, end, versions, raw,
        caching, timeoutMs, snapshot, rootDir, restoreDir, new ArrayList<>()).mapPartitions(it -> {
          List<Row> recs = new ArrayList<>();
          MessageDigest md = MessageDigest.getInstance("MD5");
          byte[] first = null;
          boolean boundary = false;
          long n = 0;
          long h1 = 0;
          long h2 = 0;
          while (it.hasNext()) {
            Result r = it.next();
            byte[] row = r.getRow();
            boolean starts = isBoundary(row, bits);
            if (first == null || starts) {
              if (first != null) {
                recs.add(RowFactory.create(first, boundary, n, h1, h2));
              }
              first = row;
              boundary = starts;
              n = 0;
              h1 = 0;
              h2 = 0;
            }
            byte[] d = md5(md, row, encodeCells(r));
            n++;
            h1 += Bytes.toLong(d, 0);
            h2 += Bytes.toLong(d, 8);
          }
          if (first != null) {
            recs.add(RowFactory.create(first, boundary, n, h1, h2));
          }
          return recs.iterator();
        });
    return spark.createDataFrame(out, chunkSchema());
  }

  /**
   * A snapshot region split that says it is not empty. HBase's {@code TableSnapshotRegionSplit.getLength()}
   * is always 0 ("TODO: We can obtain the file sizes of the snapshot here"), and Spark drops every
   * split of length 0 before reading ({@code spark.hadoopRDD.ignoreEmptySplits}, on by default): the
   * snapshot read would read no region at all and call two tables equal. Same split, same reader;
   * only its length is 1.
   */
  public static final class SizedSplit extends TableSnapshotInputFormat.TableSnapshotRegionSplit {
    public SizedSplit() {
      super();
    }

    static SizedSplit of(InputSplit split) throws IOException {
      DataOutputBuffer out = new DataOutputBuffer();
      ((TableSnapshotInputFormat.TableSnapshotRegionSplit) split).write(out);
      DataInputBuffer in = new DataInputBuffer();
      in.reset(out.getData(), out.getLength());
      SizedSplit s = new SizedSplit();
      s.readFields(in);
      return s;
    }

    @Override
    public long getLength() {
      return 1;
    }
  }

  /**
   * HBase's TableInputFormat, every split at least 1 byte long: a region's length is its size as
   * the region servers report it, in whole megabytes (0 for a small region, or with the size
   * calculator off), and Spark drops zero-length splits ({@code spark.hadoopRDD.ignoreEmptySplits}):
   * that region's rows would never be read.
   */
  public static final class RegionFormat extends TableInputFormat {
    @Override
    public List<InputSplit> getSplits(JobContext job) throws IOException {
      List<InputSplit> out = new ArrayList<>();
      for (InputSplit s : super.getSplits(job)) {
        TableSplit t = (TableSplit) s;
        out.add(t.getLength() > 0 ? t : new TableSplit(t.getTable(), t.getScan(), t.getStartRow(), t.getEndRow(),
            t.getRegionLocation(), t.getEncodedRegionName(), 1));
      }
      return out;
    }
  }

  /** HBase's TableSnapshotInputFormat, its splits as {@link SizedSplit}s. */
  public static final class SnapshotFormat extends TableSnapshotInputFormat {
    @Override
    public List<InputSplit> getSplits(JobContext job) throws IOException, InterruptedException {
      List<InputSplit> out = new ArrayList<>();
      for (InputSplit s : super.getSplits(job)) {
        out.add(SizedSplit.of(s));
      }
      return out;
    }
  }

  /**
   * Take the snapshot {@code name} of the table (HBase flushes the memstores first, so the snapshot
   * holds every cell written before it).
   */
  public static void snapshot(String quorum, String parent, String table, String name, int timeoutMs)
      throws IOException {
    try (Connection conn = ConnectionFactory.createConnection(conf(quorum, parent, timeoutMs));
         Admin admin = conn.getAdmin()) {
      admin.snapshot(name, TableName.valueOf(table));
    }
  }

  /** Delete the snapshot {@code name} (if it exists) and the restore directory. */
  public static void dropSnapshot(String quorum, String parent, String name, String rootDir, String restoreDir,
                                  int timeoutMs) throws IOException {
    try (Connection conn = ConnectionFactory.createConnection(conf(quorum, parent, timeoutMs));
         Admin admin = conn.getAdmin()) {
      for (org.apache.hadoop.hbase.client.SnapshotDescription d : admin.listSnapshots()) {
        if (d.getName().equals(name)) {
          admin.deleteSnapshot(name);
        }
      }
    } finally {
      if (restoreDir != null && !restoreDir.isEmpty()) {
        Configuration c = new Configuration();
        c.set("fs.defaultFS", new Path(rootDir).toUri().resolve("/").toString());
        Path p = new Path(restoreDir);
        FileSystem fs = p.getFileSystem(c);
        fs.delete(p, true);
      }
    }
  }

  static {
    // CellUtil is referenced so a classpath without hbase-common fails here, naming the class
    CellUtil.class.getName();
  }
}
