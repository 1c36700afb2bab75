import java.io.File;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;

import org.apache.hadoop.minikdc.MiniKdc;

/**
 * dr-toolkit's own launcher of a real KDC: Hadoop's MiniKdc (Apache Kerby), for tests, the demo
 * and benchmarks. Not Hadoop code: it only calls MiniKdc's public API.
 *
 * <pre>
 * java DrtMiniKdc --dir D --ports-file F --port P [--org DRT --domain TEST] [--max-life SECONDS]
 *                 [--keytab FILE=principal,principal...]...
 * </pre>
 *
 * Starts the KDC on 127.0.0.1:P (TCP), creates each keytab with its principals (random keys),
 * writes one JSON line to F (and stdout) with the realm and port, then sleeps until killed.
 * The KDC's database is in memory: a restart creates the principals and keytabs anew.
 */
public final class DrtMiniKdc {
  public static void main(String[] args) throws Exception {
    String dir = null, portsFile = null, org = "DRT", domain = "TEST";
    int port = 0;
    long maxLife = 0;
    List<String> keytabs = new ArrayList<>();
    for (int i = 0; i < args.length; i++) {
      switch (args[i]) {
        case "--dir": dir = args[++i]; break;
        case "--ports-file": portsFile = args[++i]; break;
        case "--port": port = Integer.parseInt(args[++i]); break;
        case "--org": org = args[++i]; break;
        case "--domain": domain = args[++i]; break;
        case "--max-life": maxLife = Long.parseLong(args[++i]); break;
        case "--keytab": keytabs.add(args[++i]); break;
        default: throw new IllegalArgumentException("unknown argument " + args[i]);
      }
    }
    if (dir == null || portsFile == null) {
      throw new IllegalArgumentException("--dir and --ports-file are required");
    }
    File work = new File(dir);
    work.mkdirs();
    Properties conf = MiniKdc.createConf();
    conf.setProperty(MiniKdc.ORG_NAME, org);
    conf.setProperty(MiniKdc.ORG_DOMAIN, domain);
    conf.setProperty(MiniKdc.KDC_BIND_ADDRESS, "127.0.0.1");
    conf.setProperty(MiniKdc.KDC_PORT, String.valueOf(port));
    conf.setProperty(MiniKdc.TRANSPORT, "TCP");
    if (maxLife > 0) {
      // seconds, as Kerby's KDC takes them; a client may still ask for a shorter ticket (down to 1 s)
      conf.setProperty(MiniKdc.MAX_TICKET_LIFETIME, String.valueOf(maxLife));
      conf.setProperty(MiniKdc.MIN_TICKET_LIFETIME, "1");
    }
    MiniKdc kdc = new MiniKdc(conf, work);
    kdc.start();
    StringBuilder created = new StringBuilder();
    for (String spec : keytabs) {
      int eq = spec.indexOf('=');
      File keytab = new File(spec.substring(0, eq));
      String[] principals = spec.substring(eq + 1).split(",");
      kdc.createPrincipal(keytab, principals);
      created.append(created.length() > 0 ? ", " : "").append('"').append(keytab.getAbsolutePath()).append('"');
    }
    String json = "{\"port\": " + kdc.getPort() + ", \"realm\": \"" + kdc.getRealm() + "\", \"krb5conf\": \""
        + kdc.getKrb5conf().getAbsolutePath() + "\", \"keytabs\": [" + created + "]}";
    File tmp = new File(portsFile + ".tmp");
    Files.write(tmp.toPath(), (json + "\n").getBytes(StandardCharsets.UTF_8));
    Files.move(tmp.toPath(), new File(portsFile).toPath(), StandardCopyOption.ATOMIC_MOVE);
    System.out.println(json);
    System.out.flush();
    Runtime.getRuntime().addShutdownHook(new Thread(kdc::stop));
    while (true) {
      Thread.sleep(60_000);
    }
  }
}
