import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hbase.HBaseConfiguration;
import org.apache.hadoop.hbase.mapreduce.replication.VerifyReplication;
import org.apache.hadoop.mapreduce.Counter;
import org.apache.hadoop.mapreduce.Job;

/**
 * HBase's own VerifyReplication (hbase-mapreduce) in the MapReduce local job runner: the baseline
 * `drt verify hbase://…` is checked against and timed against.
 *
 * <pre>java VerifyRepRunner ZK_QUORUM ZK_PORT ZNODE_PARENT WORK_DIR [-Dkey=value…] [VerifyReplication args…]</pre>
 *
 * The job reads the source table on the cluster at ZK_QUORUM:ZK_PORT:ZNODE_PARENT and compares it
 * with the peer named by the last-but-one argument (a peer id or a cluster key), exactly as
 * {@code hbase org.apache.hadoop.hbase.mapreduce.replication.VerifyReplication} does. On the last
 * line of stdout: {"ok":true,"GOODROWS":n,…,"job_s":seconds} or {"ok":false,"error":"…"}.
 */
public final class VerifyRepRunner {
  private static final String[] COUNTERS = {"GOODROWS", "BADROWS", "ONLY_IN_SOURCE_TABLE_ROWS",
      "ONLY_IN_PEER_TABLE_ROWS", "CONTENT_DIFFERENT_ROWS"};

  public static void main(String[] args) throws Exception {
    Configuration conf = HBaseConfiguration.create();
    conf.set("hbase.zookeeper.quorum", args[0]);
    conf.setInt("hbase.zookeeper.property.clientPort", Integer.parseInt(args[1]));
    conf.set("zookeeper.znode.parent", args[2]);
    conf.set("mapreduce.framework.name", "local");
    conf.set("fs.defaultFS", "file:///");
    conf.set("hadoop.tmp.dir", args[3] + "/hadoop-tmp");
    conf.set("mapreduce.jobtracker.staging.root.dir", args[3] + "/staging");
    conf.set("mapreduce.cluster.local.dir", args[3] + "/local");
    // Job.waitForCompletion(false) polls every mapreduce.client.completion.pollinterval (5,000 ms by
    // default): up to 5 s after the job is done (the shipped tool's waitForCompletion(true) polls
    // every 1,000 ms). A client setting only; a -D on the command line still wins.
    conf.set("mapreduce.client.completion.pollinterval", "100");
    // -Dkey=value before VerifyReplication's own arguments go into the job's configuration, as
    // `hbase …VerifyReplication -Dhbase.mapreduce.scan.cachedrows=1000 …` does through ToolRunner
    java.util.List<String> rest = new java.util.ArrayList<>();
    for (int i = 4; i < args.length; i++) {
      if (args[i].startsWith("-D") && args[i].contains("=")) {
        String kv = args[i].substring(2);
        conf.set(kv.substring(0, kv.indexOf('=')), kv.substring(kv.indexOf('=') + 1));
      } else {
        rest.add(args[i]);
      }
    }
    String[] vr = rest.toArray(new String[0]);
    long t0 = System.nanoTime();
    Job job = new VerifyReplication().createSubmittableJob(conf, vr);
    if (job == null) {
      System.out.println("{\"ok\":false,\"error\":\"VerifyReplication rejected its arguments\"}");
      System.exit(2);
    }
    boolean ok = job.waitForCompletion(false);
    double took = (System.nanoTime() - t0) / 1e9;
    StringBuilder sb = new StringBuilder("{\"ok\":").append(ok);
    for (String c : COUNTERS) {
      Counter counter = job.getCounters().findCounter(VerifyReplication.Verifier.Counters.valueOf(c));
      sb.append(",\"").append(c).append("\":").append(counter == null ? 0 : counter.getValue());
    }
    sb.append(",\"job_s\":").append(took).append("}");
    System.out.println(sb);
    System.out.flush();
    System.exit(ok ? 0 : 1);
  }

  private VerifyRepRunner() {
  }
}
