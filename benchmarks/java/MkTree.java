// Benchmark support (benchmarks/gate_scale_bench.py): makes a namespace of N empty files on a real
// HDFS through Hadoop's own client over RPC (DistributedFileSystem: one create + close per file, no
// DataNode traffic), in directories of PER files, with every file's mtime set to MTIME (so two
// clusters made alike hold equal trees; MTIME_MS -1: left as created). Usage: MkTree hdfs://host:port ROOT N PER MTIME_MS THREADS
import java.net.URI;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;

public final class MkTree {
    public static void main(String[] args) throws Exception {
        URI uri = URI.create(args[0]);
        String root = args[1];
        long n = Long.parseLong(args[2]);
        int per = Integer.parseInt(args[3]);
        long mtime = Long.parseLong(args[4]);
        int threads = Integer.parseInt(args[5]);
        Configuration conf = new Configuration();
        FileSystem fs = FileSystem.get(uri, conf, "hdfs");
        long dirs = (n + per - 1) / per;
        ExecutorService ex = Executors.newFixedThreadPool(threads);
        AtomicLong made = new AtomicLong();
        for (long d = 0; d < dirs; d++) {
            final long dd = d;
            ex.submit(() -> {
                try {
                    Path dir = new Path(root + "/d" + (dd / 100) + "/e" + dd);
                    fs.mkdirs(dir);
                    for (long i = dd * per; i < Math.min(n, (dd + 1) * per); i++) {
                        Path p = new Path(dir, "f" + i);
                        fs.create(p, true).close();
                        if (mtime >= 0) { fs.setTimes(p, mtime, -1); }
                        made.incrementAndGet();
                    }
                } catch (Exception e) {
                    e.printStackTrace();
                    System.exit(1);
                }
            });
        }
        ex.shutdown();
        ex.awaitTermination(1, TimeUnit.DAYS);
        System.out.println(made.get());
    }
}
