// Real Java exceptions for the hold-out cases' logback lines (Java 17, PgJDBC from Debian).
//
// java -cp CLASSES:/usr/share/java/postgresql.jar com.example.fleet.Capture MODE ARGS...
//   timeout                     CompletableFuture.get(timeout) -> TimeoutException
//   reserve JDBC_URL NODE ALLOC update the allocation row through JDBC; on failure the
//                               reservation service wraps the SQLException
// Prints one JSON object per line: {"mode", "type", "message", "stack_trace", "at_ns"}.
package com.example.fleet;

import java.io.PrintWriter;
import java.io.StringWriter;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

class ReservationException extends RuntimeException {
    ReservationException(String message, Throwable cause) {
        super(message, cause);
    }
}

class NodeReservationService {
    private final String url;

    NodeReservationService(String url) {
        this.url = url;
    }

    String reserve(String node, String allocation) {
        String comment = " /*allocation_id='" + allocation + "',node_id='" + node + "'*/";
        try (Connection conn = DriverManager.getConnection(url)) {
            conn.setAutoCommit(false);
            try (PreparedStatement read = conn.prepareStatement(
                    "SELECT state FROM nodes WHERE id = ?" + comment)) {
                read.setString(1, node);
                try (ResultSet rs = read.executeQuery()) {
                    rs.next();
                }
            }
            try (PreparedStatement write = conn.prepareStatement(
                    "UPDATE nodes SET state = 'reserved', allocation_id = ? WHERE id = ? AND state = 'available'"
                            + comment)) {
                write.setString(1, allocation);
                write.setString(2, node);
                write.executeUpdate();
            }
            conn.commit();
            return "reserved";
        } catch (SQLException e) {
            throw new ReservationException(
                    "reservation of node " + node + " for allocation " + allocation + " failed", e);
        }
    }
}

public class Capture {
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

    private static void print(String mode, Throwable t) {
        StringWriter w = new StringWriter();
        t.printStackTrace(new PrintWriter(w));
        String message = t.getMessage() == null ? "" : t.getMessage();
        System.out.println("{\"mode\":" + json(mode) + ",\"type\":" + json(t.getClass().getName())
                + ",\"message\":" + json(message) + ",\"stack_trace\":" + json(w.toString())
                + ",\"at_ns\":" + (System.currentTimeMillis() * 1_000_000L) + "}");
    }

    public static void main(String[] args) throws Exception {
        switch (args[0]) {
            case "timeout" -> {
                CompletableFuture<String> report = new CompletableFuture<>();
                try {
                    report.get(Long.parseLong(args[1]), TimeUnit.MILLISECONDS);
                } catch (Exception e) {
                    print("timeout", e);
                }
            }
            case "reserve" -> {
                NodeReservationService service = new NodeReservationService(args[1]);
                try {
                    System.out.println("{\"mode\":\"reserve\",\"result\":" + json(service.reserve(args[2], args[3]))
                            + ",\"at_ns\":" + (System.currentTimeMillis() * 1_000_000L) + "}");
                } catch (ReservationException e) {
                    print("reserve", e);
                }
            }
            default -> throw new IllegalArgumentException(args[0]);
        }
    }
}
