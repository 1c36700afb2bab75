import java.io.File;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.StandardCopyOption;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.service.CompositeService;
import org.apache.hadoop.yarn.conf.YarnConfiguration;
import org.apache.hadoop.yarn.server.nodemanager.NodeManager;
import org.apache.hadoop.yarn.server.resourcemanager.ResourceManager;

/**
 * dr-toolkit's own launcher of one real YARN daemon (the ResourceManager or a NodeManager) from
 * Hadoop's minicluster jar, for tests, the demo and benchmarks. Not Hadoop code: it only calls
 * the daemons' public service life cycle (init, start), as their own main methods do, with the
 * configuration given on the command line instead of a yarn-site.xml.
 *
 * <pre>
 * java DrtYarn --role rm|nm --ready-file F [--conf key=value]...
 * </pre>
 *
 * Each daemon runs in its own JVM as on a real cluster: MiniYARNCluster runs both in one JVM,
 * where the NodeManager's web application replaces the ResourceManager's (Guice's servlet filter
 * is static), so the ResourceManager's REST API answers 404. Writes one JSON line to F (and
 * stdout) once the daemon is up; sleeps until killed.
 */
public final class DrtYarn {
  public static void main(String[] args) throws Exception {
    String role = null, readyFile = null;
    Configuration conf = new YarnConfiguration();
    for (int i = 0; i < args.length; i++) {
      switch (args[i]) {
        case "--role": role = args[++i]; break;
        case "--ready-file": readyFile = args[++i]; break;
        case "--conf": {
          String kv = args[++i];
          int eq = kv.indexOf('=');
          conf.set(kv.substring(0, eq), kv.substring(eq + 1));
          break;
        }
        default: throw new IllegalArgumentException("unknown argument " + args[i]);
      }
    }
    if (role == null || readyFile == null) {
      throw new IllegalArgumentException("--role and --ready-file are required");
    }
    CompositeService daemon;
    if ("rm".equals(role)) {
      daemon = new ResourceManager();
    } else if ("nm".equals(role)) {
      daemon = new NodeManager();
    } else {
      throw new IllegalArgumentException("--role must be rm or nm, not " + role);
    }
    daemon.init(conf);
    daemon.start();
    Configuration eff = daemon.getConfig();
    String json = "{\"role\": \"" + role + "\", \"rm\": \"" + eff.get(YarnConfiguration.RM_ADDRESS)
        + "\", \"rm_web\": \"" + eff.get(YarnConfiguration.RM_WEBAPP_ADDRESS)
        + "\", \"log_dirs\": \"" + eff.get(YarnConfiguration.NM_LOG_DIRS)
        + "\", \"local_dirs\": \"" + eff.get(YarnConfiguration.NM_LOCAL_DIRS)
        + "\", \"user\": \"" + System.getProperty("user.name") + "\"}";
    File tmp = new File(readyFile + ".tmp");
    Files.write(tmp.toPath(), (json + "\n").getBytes(StandardCharsets.UTF_8));
    Files.move(tmp.toPath(), new File(readyFile).toPath(), StandardCopyOption.ATOMIC_MOVE);
    System.out.println(json);
    System.out.flush();
    Thread.sleep(Long.MAX_VALUE);
  }
}
