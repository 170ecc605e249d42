// NJavaClient: one HTTP request with java.net.http.HttpClient, printed as JSON, so the incident
// generators (n_lab.py) can log the exact exception text and stack trace a Java service sees.
// Usage: java NJavaClient METHOD URL CA_PEM TIMEOUT_S [BODY] [HEADER:VALUE...]
import java.io.ByteArrayInputStream;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.KeyStore;
import java.security.cert.CertificateFactory;
import java.security.cert.X509Certificate;
import java.time.Duration;
import javax.net.ssl.SSLContext;
import javax.net.ssl.TrustManagerFactory;

public class NJavaClient {
    static String q(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            switch (c) {
                case '"': b.append("\\\""); break;
                case '\\': b.append("\\\\"); break;
                case '\n': b.append("\\n"); break;
                case '\r': b.append("\\r"); break;
                case '\t': b.append("\\t"); break;
                default:
                    if (c < 0x20) b.append(String.format("\\u%04x", (int) c)); else b.append(c);
            }
        }
        return b.append('"').toString();
    }

    public static void main(String[] args) throws Exception {
        String method = args[0], url = args[1], ca = args[2];
        double timeout = Double.parseDouble(args[3]);
        String body = args.length > 4 ? args[4] : "";
        HttpClient.Builder builder = HttpClient.newBuilder()
            .connectTimeout(Duration.ofMillis((long) (timeout * 1000)));
        if (!ca.isEmpty()) {
            CertificateFactory cf = CertificateFactory.getInstance("X.509");
            X509Certificate cert = (X509Certificate) cf.generateCertificate(
                new ByteArrayInputStream(Files.readAllBytes(Path.of(ca))));
            KeyStore ks = KeyStore.getInstance(KeyStore.getDefaultType());
            ks.load(null, null);
            ks.setCertificateEntry("ca", cert);
            TrustManagerFactory tmf = TrustManagerFactory.getInstance(
                TrustManagerFactory.getDefaultAlgorithm());
            tmf.init(ks);
            SSLContext ctx = SSLContext.getInstance("TLS");
            ctx.init(null, tmf.getTrustManagers(), null);
            builder.sslContext(ctx);
        }
        HttpClient client = builder.build();
        HttpRequest.Builder rb = HttpRequest.newBuilder(URI.create(url))
            .timeout(Duration.ofMillis((long) (timeout * 1000)))
            .header("User-Agent", "wf-orchestrator/3.8.1 Java-http-client/17.0.15")
            .header("Content-Type", "application/json")
            .method(method, body.isEmpty() ? HttpRequest.BodyPublishers.noBody()
                : HttpRequest.BodyPublishers.ofString(body));
        for (int i = 5; i < args.length; i++) {
            int colon = args[i].indexOf(':');
            rb.header(args[i].substring(0, colon), args[i].substring(colon + 1));
        }
        try {
            HttpResponse<String> resp = client.send(rb.build(), HttpResponse.BodyHandlers.ofString());
            StringBuilder h = new StringBuilder("{");
            resp.headers().map().forEach((k, v) -> {
                if (h.length() > 1) h.append(',');
                h.append(q(k.toLowerCase())).append(':').append(q(String.join(",", v)));
            });
            h.append('}');
            System.out.println("{\"status\":" + resp.statusCode() + ",\"body\":" + q(resp.body())
                + ",\"headers\":" + h + "}");
        } catch (Exception e) {
            StringWriter sw = new StringWriter();
            e.printStackTrace(new PrintWriter(sw));
            System.out.println("{\"error\":" + q(e.toString()) + ",\"stack\":" + q(sw.toString()) + "}");
        }
    }
}
