// The node registry of the hold-out api_auth case: Java 17's built-in HTTP server, bearer
// tokens (HS256 JWTs) checked on every request, logstash-logback-style JSON lines on stdout.
//
// java -cp CLASSES com.example.registry.RegistryServer PORT SECRET
package com.example.registry;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.io.OutputStream;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.time.Instant;
import java.time.OffsetDateTime;
import java.time.ZoneOffset;
import java.time.format.DateTimeFormatter;
import java.util.Base64;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;

class InvalidBearerTokenException extends RuntimeException {
    InvalidBearerTokenException(String message) {
        super(message);
    }
}

class JwtValidator {
    private final byte[] secret;

    JwtValidator(String secret) {
        this.secret = secret.getBytes(StandardCharsets.UTF_8);
    }

    Map<String, String> validate(String token) {
        String[] parts = token.split("\\.");
        if (parts.length != 3) {
            throw new InvalidBearerTokenException("An error occurred while attempting to decode the Jwt: Malformed token");
        }
        try {
            Mac mac = Mac.getInstance("HmacSHA256");
            mac.init(new SecretKeySpec(secret, "HmacSHA256"));
            byte[] expected = mac.doFinal((parts[0] + "." + parts[1]).getBytes(StandardCharsets.UTF_8));
            if (!MessageDigest.isEqual(expected, Base64.getUrlDecoder().decode(parts[2]))) {
                throw new InvalidBearerTokenException("An error occurred while attempting to decode the Jwt: Signed JWT rejected: Invalid signature");
            }
        } catch (java.security.GeneralSecurityException e) {
            throw new IllegalStateException(e);
        }
        String payload = new String(Base64.getUrlDecoder().decode(parts[1]), StandardCharsets.UTF_8);
        Map<String, String> claims = new LinkedHashMap<>();
        Matcher m = Pattern.compile("\"(\\w+)\"\\s*:\\s*\"?([^\",}]*)\"?").matcher(payload);
        while (m.find()) {
            claims.put(m.group(1), m.group(2));
        }
        Instant exp = Instant.ofEpochSecond(Long.parseLong(claims.get("exp")));
        if (Instant.now().isAfter(exp)) {
            throw new InvalidBearerTokenException("An error occurred while attempting to decode the Jwt: Jwt expired at " + exp);
        }
        return claims;
    }
}

public class RegistryServer {
    private static final DateTimeFormatter TS = DateTimeFormatter.ofPattern("yyyy-MM-dd'T'HH:mm:ss.SSSXXX");

    private static String json(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            switch (c) {
                case '"' -> b.append("\\\"");
                case '\\' -> b.append("\\\\");
                case '\n' -> b.append("\\n");
                case '\t' -> b.append("\\t");
                case '\r' -> b.append("\\r");
                default -> b.append(c);
            }
        }
        return b.append('"').toString();
    }

    static synchronized void log(String level, int levelValue, String logger, String message, Map<String, String> mdc, Throwable t) {
        StringBuilder b = new StringBuilder("{");
        b.append("\"ts\":").append(json(OffsetDateTime.now(ZoneOffset.ofHours(1)).format(TS)));
        b.append(",\"@version\":\"1\",\"level\":").append(json(level)).append(",\"level_value\":").append(levelValue);
        b.append(",\"event\":").append(json(message));
        b.append(",\"service\":\"node-registry\",\"layer\":\"api\"");
        b.append(",\"logger_name\":").append(json(logger));
        b.append(",\"thread_name\":").append(json(Thread.currentThread().getName()));
        for (Map.Entry<String, String> e : mdc.entrySet()) {
            if (e.getValue() != null) {
                b.append(",").append(json(e.getKey())).append(":").append(json(e.getValue()));
            }
        }
        if (t != null) {
            StringWriter w = new StringWriter();
            t.printStackTrace(new PrintWriter(w));
            b.append(",\"stack_trace\":").append(json(w.toString()));
        }
        System.out.println(b.append("}"));
        System.out.flush();
    }

    private static void answer(HttpExchange ex, int status, String body) throws IOException {
        byte[] data = body.getBytes(StandardCharsets.UTF_8);
        ex.getResponseHeaders().set("Content-Type", "application/json");
        ex.sendResponseHeaders(status, data.length);
        try (OutputStream out = ex.getResponseBody()) {
            out.write(data);
        }
    }

    public static void main(String[] args) throws IOException {
        JwtValidator validator = new JwtValidator(args[1]);
        HttpServer server = HttpServer.create(new InetSocketAddress("127.0.0.1", Integer.parseInt(args[0])), 32);
        Pattern route = Pattern.compile("/v1/nodes/([^/]+)/registration");
        server.createContext("/", ex -> {
            long started = System.nanoTime();
            Map<String, String> mdc = new LinkedHashMap<>();
            mdc.put("correlation_id", ex.getRequestHeaders().getFirst("X-Request-ID"));
            String path = ex.getRequestURI().getPath();
            String body = new String(ex.getRequestBody().readAllBytes(), StandardCharsets.UTF_8);
            int status;
            Matcher m = route.matcher(path);
            if (path.equals("/healthz")) {
                status = 200;
                answer(ex, status, "{\"ok\":true}");
            } else if (m.matches() && ex.getRequestMethod().equals("POST")) {
                mdc.put("node_id", m.group(1));
                String auth = ex.getRequestHeaders().getFirst("Authorization");
                try {
                    if (auth == null || !auth.startsWith("Bearer ")) {
                        throw new InvalidBearerTokenException("Bearer token is missing");
                    }
                    Map<String, String> claims = validator.validate(auth.substring(7));
                    Matcher a = Pattern.compile("\"allocation_id\"\\s*:\\s*\"([^\"]+)\"").matcher(body);
                    if (a.find()) {
                        mdc.put("allocation_id", a.group(1));
                    }
                    log("INFO", 20000, "com.example.registry.NodeRegistration", "node registered by " + claims.get("sub"), mdc, null);
                    status = 201;
                    answer(ex, status, "{\"registered\":true}");
                } catch (InvalidBearerTokenException e) {
                    log("WARN", 30000, "com.example.registry.security.BearerTokenFilter", "Bearer token rejected", mdc, e);
                    String description = e.getMessage().replaceFirst("^An error occurred while attempting to decode the Jwt: ", "");
                    ex.getResponseHeaders().set("WWW-Authenticate", "Bearer error=\"invalid_token\", error_description=\"" + description + "\", error_uri=\"https://tools.ietf.org/html/rfc6750#section-3.1\"");
                    status = 401;
                    answer(ex, status, "");
                }
            } else {
                status = 404;
                answer(ex, status, "{\"error\":\"no such route\"}");
            }
            mdc.put("method", ex.getRequestMethod());
            mdc.put("path", path);
            log("INFO", 20000, "com.example.registry.http.AccessLog", ex.getRequestMethod() + " " + path + " " + status + " (" + (System.nanoTime() - started) / 1_000_000 + " ms)", mdc, null);
        });
        server.start();
        log("INFO", 20000, "com.example.registry.RegistryServer", "listening on 127.0.0.1:" + args[0], new LinkedHashMap<>(), null);
    }
}
