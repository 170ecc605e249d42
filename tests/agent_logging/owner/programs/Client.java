// Client makes one JDK call fail and prints what a Java service logs of it: the exception's
// class and message (first two lines, "TYPE" then "MESSAGE"), a line "--", then the stack trace
// exactly as Throwable.printStackTrace() prints it, causes included.
//
// Build: javac -d OUT Client.java; run: java -cp OUT Client MODE ARGS...
//
//   get URL [CA.pem]   HttpsURLConnection/HttpURLConnection GET; a non-2xx answer throws
//                      the JDK's own IOException ("Server returned HTTP response code: 401 ...")
//   exec NAME          ProcessBuilder(NAME).start()
import java.io.FileInputStream;
import java.io.InputStream;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.net.HttpURLConnection;
import java.net.URL;
import java.security.KeyStore;
import java.security.cert.CertificateFactory;
import java.security.cert.X509Certificate;
import javax.net.ssl.HttpsURLConnection;
import javax.net.ssl.SSLContext;
import javax.net.ssl.TrustManagerFactory;

public class Client {
    static SSLContext trusting(String caPath) throws Exception {
        KeyStore store = KeyStore.getInstance(KeyStore.getDefaultType());
        store.load(null, null);
        try (InputStream in = new FileInputStream(caPath)) {
            X509Certificate ca = (X509Certificate) CertificateFactory.getInstance("X.509")
                .generateCertificate(in);
            store.setCertificateEntry("local-ca", ca);
        }
        TrustManagerFactory factory =
            TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
        factory.init(store);
        SSLContext context = SSLContext.getInstance("TLS");
        context.init(null, factory.getTrustManagers(), null);
        return context;
    }

    static void get(String url, String caPath) throws Exception {
        HttpURLConnection connection = (HttpURLConnection) new URL(url).openConnection();
        connection.setConnectTimeout(5000);
        connection.setReadTimeout(10000);
        if (caPath != null && connection instanceof HttpsURLConnection) {
            ((HttpsURLConnection) connection)
                .setSSLSocketFactory(trusting(caPath).getSocketFactory());
        }
        try (InputStream body = connection.getInputStream()) {
            body.readAllBytes();
        }
    }

    public static void main(String[] args) {
        try {
            if (args[0].equals("get")) {
                get(args[1], args.length > 2 ? args[2] : null);
            } else if (args[0].equals("exec")) {
                new ProcessBuilder(args[1]).start().waitFor();
            }
        } catch (Exception e) {
            StringWriter trace = new StringWriter();
            e.printStackTrace(new PrintWriter(trace));
            System.out.println(e.getClass().getName());
            System.out.println(e.getMessage());
            System.out.println("--");
            System.out.print(trace);
            System.exit(1);
        }
    }
}
