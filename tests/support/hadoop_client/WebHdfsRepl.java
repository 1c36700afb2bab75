// Test support: drives Hadoop's own FileSystem clients (from pyspark's bundled hadoop-client jars:
// WebHdfsFileSystem for webhdfs://, DistributedFileSystem for hdfs://) against the real HDFS the
// tests run. One command per stdin line (tab-separated), one JSON object per stdout line. Used by
// test_hadoop_client_conformance.py.
import java.io.BufferedReader;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.util.HexFormat;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileChecksum;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Options;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.hdfs.protocol.SnapshotDiffReport;
import org.apache.hadoop.hdfs.web.WebHdfsFileSystem;

public final class WebHdfsRepl {
    private static String q(String s) {
        if (s == null) { return "null"; }
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') { b.append('\\').append(c); }
            else if (c < 0x20) { b.append(String.format("\\u%04x", (int) c)); }
            else { b.append(c); }
        }
        return b.append('"').toString();
    }

    private static String status(FileStatus s) {
        return "{\"name\":" + q(s.getPath().getName()) + ",\"path\":" + q(s.getPath().toUri().getPath())
            + ",\"dir\":" + s.isDirectory() + ",\"length\":" + s.getLen() + ",\"blockSize\":" + s.getBlockSize()
            + ",\"replication\":" + s.getReplication() + ",\"mtime\":" + s.getModificationTime() + "}";
    }

    public static void main(String[] args) throws Exception {
        Configuration conf = new Configuration();
        for (int i = 1; i < args.length; i++) {
            int eq = args[i].indexOf('=');
            conf.set(args[i].substring(0, eq), args[i].substring(eq + 1));
        }
        FileSystem fs = FileSystem.get(new URI(args[0]), conf);
        System.out.println("{\"ready\":true,\"class\":" + q(fs.getClass().getName()) + "}");
        System.out.flush();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        HexFormat hex = HexFormat.of();
        String line;
        while ((line = in.readLine()) != null) {
            String[] a = line.split("\t", -1);
            String out;
            try {
                switch (a[0]) {
                    case "ls": {
                        StringBuilder b = new StringBuilder("{\"items\":[");
                        FileStatus[] items = fs.listStatus(new Path(a[1]));
                        for (int i = 0; i < items.length; i++) { b.append(i > 0 ? "," : "").append(status(items[i])); }
                        out = b.append("]}").toString();
                        break;
                    }
                    case "stat": out = "{\"status\":" + status(fs.getFileStatus(new Path(a[1]))) + "}"; break;
                    case "mkdirs": out = "{\"ok\":" + fs.mkdirs(new Path(a[1])) + "}"; break;
                    case "create": {
                        long bs = a.length > 3 && !a[3].isEmpty() ? Long.parseLong(a[3]) : fs.getDefaultBlockSize(new Path(a[1]));
                        try (OutputStream o = fs.create(new Path(a[1]), true, 4096, (short) 1, bs)) { o.write(hex.parseHex(a[2])); }
                        out = "{\"ok\":true}";
                        break;
                    }
                    case "append": {
                        try (OutputStream o = fs.append(new Path(a[1]))) { o.write(hex.parseHex(a[2])); }
                        out = "{\"ok\":true}";
                        break;
                    }
                    case "open": {
                        try (InputStream i = fs.open(new Path(a[1]))) {
                            if (a.length > 2) { i.skip(Long.parseLong(a[2])); }
                            out = "{\"hex\":" + q(hex.formatHex(i.readAllBytes())) + "}";
                        }
                        break;
                    }
                    case "rename": out = "{\"ok\":" + fs.rename(new Path(a[1]), new Path(a[2])) + "}"; break;
                    case "rename_overwrite": {
                        ((WebHdfsFileSystem) fs).rename(new Path(a[1]), new Path(a[2]), Options.Rename.OVERWRITE);
                        out = "{\"ok\":true}";
                        break;
                    }
                    case "delete": out = "{\"ok\":" + fs.delete(new Path(a[1]), Boolean.parseBoolean(a[2])) + "}"; break;
                    case "checksum": {
                        FileChecksum c = fs.getFileChecksum(new Path(a[1]));
                        out = "{\"algorithm\":" + q(c.getAlgorithmName()) + ",\"bytes\":" + q(hex.formatHex(c.getBytes()))
                            + ",\"class\":" + q(c.getClass().getSimpleName()) + ",\"length\":" + c.getLength() + "}";
                        break;
                    }
                    case "allow_snapshot": ((WebHdfsFileSystem) fs).allowSnapshot(new Path(a[1])); out = "{\"ok\":true}"; break;
                    case "snapshot": out = "{\"path\":" + q(fs.createSnapshot(new Path(a[1]), a[2]).toUri().getPath()) + "}"; break;
                    case "snapdiff":
                    case "snapdiff_rest": {
                        SnapshotDiffReport r;
                        if (a[0].equals("snapdiff")) {
                            r = ((WebHdfsFileSystem) fs).getSnapshotDiffReport(new Path(a[1]), a[2], a[3]);
                        } else {  // GETSNAPSHOTDIFF as the REST call answers it, parsed by Hadoop's JsonUtilClient
                            java.net.HttpURLConnection c = (java.net.HttpURLConnection) new java.net.URL(a[4]
                                + "/webhdfs/v1" + a[1] + "?op=GETSNAPSHOTDIFF&oldsnapshotname=" + a[2]
                                + "&snapshotname=" + a[3] + "&user.name=hdfs").openConnection();
                            try (InputStream i = c.getInputStream()) {
                                java.util.Map<?, ?> m = new org.apache.hadoop.shaded.com.fasterxml.jackson.databind.ObjectMapper()
                                    .readValue(i, java.util.Map.class);
                                r = org.apache.hadoop.hdfs.web.JsonUtilClient.toSnapshotDiffReport(m);
                            }
                        }
                        StringBuilder b = new StringBuilder("{\"entries\":[");
                        int i = 0;
                        for (SnapshotDiffReport.DiffReportEntry e : r.getDiffList()) {
                            b.append(i++ > 0 ? "," : "").append("{\"type\":").append(q(e.getType().getLabel()))
                             .append(",\"source\":").append(q(new String(e.getSourcePath(), StandardCharsets.UTF_8)))
                             .append(",\"target\":").append(e.getTargetPath() == null ? "null"
                                 : q(new String(e.getTargetPath(), StandardCharsets.UTF_8))).append("}");
                        }
                        out = b.append("]}").toString();
                        break;
                    }
                    case "home": out = "{\"path\":" + q(fs.getHomeDirectory().toUri().getPath()) + "}"; break;
                    default: out = "{\"error\":\"UnknownCommand\",\"message\":" + q(a[0]) + "}";
                }
            } catch (Exception e) {
                Throwable t = e;
                out = "{\"error\":" + q(t.getClass().getName()) + ",\"message\":" + q(String.valueOf(t.getMessage())) + "}";
            }
            System.out.println(out);
            System.out.flush();
        }
        fs.close();
    }
}
