// dr-toolkit: the one piece of a JAX-RS runtime Hadoop's WebHDFS client needs.
//
// pyspark ships Hadoop's shaded client (hadoop-client-api/-runtime) with the shaded JAX-RS API
// but no implementation, so WebHdfsFileSystem fails on every JSON response with
// ClassNotFoundException: org.apache.hadoop.shaded.org.glassfish.jersey.internal.RuntimeDelegateImpl.
// The client only calls MediaType.valueOf (to check the Content-Type); this delegate parses media
// types and refuses everything else. It is found through
// META-INF/services/org.apache.hadoop.shaded.javax.ws.rs.ext.RuntimeDelegate (built by
// dr_toolkit.spark.hadoop.build_jaxrs_shim, which compiles this file against Spark's jars).
package org.drtoolkit.hadoop;

import java.util.LinkedHashMap;
import java.util.Map;

import org.apache.hadoop.shaded.javax.ws.rs.core.Application;
import org.apache.hadoop.shaded.javax.ws.rs.core.Link;
import org.apache.hadoop.shaded.javax.ws.rs.core.MediaType;
import org.apache.hadoop.shaded.javax.ws.rs.core.Response;
import org.apache.hadoop.shaded.javax.ws.rs.core.UriBuilder;
import org.apache.hadoop.shaded.javax.ws.rs.core.Variant;
import org.apache.hadoop.shaded.javax.ws.rs.ext.RuntimeDelegate;

public final class MediaTypeRuntimeDelegate extends RuntimeDelegate {
    public MediaTypeRuntimeDelegate() { }
    @Override public UriBuilder createUriBuilder() { throw unsupported("UriBuilder"); }
    @Override public Response.ResponseBuilder createResponseBuilder() { throw unsupported("ResponseBuilder"); }
    @Override public Variant.VariantListBuilder createVariantListBuilder() { throw unsupported("VariantListBuilder"); }
    @Override public <T> T createEndpoint(Application app, Class<T> type) { throw unsupported("endpoints"); }
    @Override public Link.Builder createLinkBuilder() { throw unsupported("Link.Builder"); }
    @SuppressWarnings("unchecked")
    @Override public <T> HeaderDelegate<T> createHeaderDelegate(Class<T> type) {
        if (type == MediaType.class) { return (HeaderDelegate<T>) new MediaTypeDelegate(); }
        throw unsupported("header delegate for " + type.getName());
    }
    private static UnsupportedOperationException unsupported(String what) {
        return new UnsupportedOperationException("dr-toolkit JAX-RS shim: only media types are supported, not " + what);
    }
    static final class MediaTypeDelegate implements HeaderDelegate<MediaType> {
        @Override public MediaType fromString(String value) {
            if (value == null) { throw new IllegalArgumentException("media type is null"); }
            String[] parts = value.split(";");
            String full = parts[0].trim();
            if (full.isEmpty() || full.equals("*")) { full = "*/*"; }
            int slash = full.indexOf('/');
            if (slash <= 0 || slash == full.length() - 1) { throw new IllegalArgumentException("bad media type: " + value); }
            Map<String, String> params = new LinkedHashMap<>();
            for (int i = 1; i < parts.length; i++) {
                String p = parts[i].trim();
                int eq = p.indexOf('=');
                if (eq <= 0) { continue; }
                String v = p.substring(eq + 1).trim();
                if (v.length() >= 2 && v.startsWith("\"") && v.endsWith("\"")) { v = v.substring(1, v.length() - 1); }
                params.put(p.substring(0, eq).trim().toLowerCase(java.util.Locale.ROOT), v);
            }
            return new MediaType(full.substring(0, slash).trim(), full.substring(slash + 1).trim(), params);
        }
        @Override public String toString(MediaType m) {
            StringBuilder b = new StringBuilder(m.getType()).append('/').append(m.getSubtype());
            for (Map.Entry<String, String> e : m.getParameters().entrySet()) {
                b.append(';').append(e.getKey()).append('=').append(e.getValue());
            }
            return b.toString();
        }
    }
}
