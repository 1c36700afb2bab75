import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hbase.HBaseConfiguration;
import org.apache.hadoop.hbase.mapreduce.replication.VerifyReplication;
import org.apache.hadoop.mapreduce.Counter;
import org.apache.hadoop.mapreduce.Job;

/**
 * HBase's own VerifyReplication (hbase-mapreduce) in the MapReduce local job runner: the baseline
 * `drt verify hbase://…` is checked against and timed against.
 *
 * <pre>java VerifyRepRunner ZK_QUORUM ZK_PORT ZNODE_PARENT WORK_DIR [-Dkey=value…] [VerifyReplication args…]
 *     [--then [-Dkey=value…] [VerifyReplication args…]]…</pre>
 *
 * The job reads the source table on the cluster at ZK_QUORUM:ZK_PORT:ZNODE_PARENT and compares it
 * with the peer named by the last-but-one argument (a peer id or a cluster key), exactly as
 * {@code hbase org.apache.hadoop.hbase.mapreduce.replication.VerifyReplication} does. One line of
 * stdout per job: {"ok":true,"GOODROWS":n,…,"job_s":seconds} or {"ok":false,"error":"…"}.
 *
 * {@code --then} starts another job in the same JVM, one after the other: each its own
 * VerifyReplication, Job and configuration (a copy of the base one with its own -D keys), so a
 * job sees nothing of the one before; the JVM's start and class loading are paid once.
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
    java.util.List<java.util.List<String>> jobs = new java.util.ArrayList<>();
    jobs.add(new java.util.ArrayList<>());
    for (int i = 4; i < args.length; i++) {
      if (args[i].equals("--then")) {
        jobs.add(new java.util.ArrayList<>());
      } else {
        jobs.get(jobs.size() - 1).add(args[i]);
      }
    }
    boolean all = true;
    for (java.util.List<String> job : jobs) {
      int rc = run(new Configuration(conf), job);
      if (rc == 2) {
        System.exit(2);
      }
      all &= rc == 0;
    }
    System.exit(all ? 0 : 1);
  }

  private static int run(Configuration conf, java.util.List<String> args) throws Exception {
    // -Dkey=value before VerifyReplication's own arguments go into the job's configuration, as
    // `hbase …VerifyReplication -Dhbase.mapreduce.scan.cachedrows=1000 …` does through ToolRunner
    java.util.List<String> rest = new java.util.ArrayList<>();
    for (String a : args) {
      if (a.startsWith("-D") && a.contains("=")) {
        String kv = a.substring(2);
        conf.set(kv.substring(0, kv.indexOf('=')), kv.substring(kv.indexOf('=') + 1));
      } else {
        rest.add(a);
      }
    }
    String[] vr = rest.toArray(new String[0]);
    long t0 = System.nanoTime();
    Job job = new VerifyReplication().createSubmittableJob(conf, vr);
    if (job == null) {
      System.out.println("{\"ok\":false,\"error\":\"VerifyReplication rejected its arguments\"}");
      System.out.flush();
      return 2;
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
    return ok ? 0 : 1;
  }

  private VerifyRepRunner() {
  }
}
