// logfmt_lines writes logfmt records with go-logfmt's encoder, as go-kit's logger does.
//
// Regenerate tests/correlator/sources/text/fixtures/logfmt_gologfmt.log with (Debian's
// golang-github-go-logfmt-logfmt-dev provides the library offline):
//
//	GO111MODULE=off GOPATH=/usr/share/gocode go run logfmt_lines.go > ../fixtures/logfmt_gologfmt.log
package main

import (
	"os"
	"time"

	"github.com/go-logfmt/logfmt"
)

func main() {
	enc := logfmt.NewEncoder(os.Stdout)
	now := time.Now().UTC()
	records := [][]interface{}{
		{"ts", now.Format(time.RFC3339Nano), "level", "info", "msg", "listening", "addr", ":8080"},
		{"ts", now.Add(time.Millisecond).Format(time.RFC3339Nano), "level", "debug", "msg", "request started", "request_id", "req-3ea4052c-895d-4b64-9e2d-04d64c4d94ab", "method", "GET"},
		{"ts", now.Add(2 * time.Millisecond).Format(time.RFC3339Nano), "level", "error", "msg", "upstream failed: \"timeout\"\nretrying", "host", "worker-1", "err", "dial tcp 10.0.0.1:443: i/o timeout"},
		{"ts", now.Add(3 * time.Millisecond).Format(time.RFC3339), "lvl", "warn", "message", "=equals and spaces=", "empty", ""},
		{"t", now.Add(4 * time.Millisecond).Format(time.RFC3339Nano), "level", "info", "msg", "unicode ✓ ünïcödé"},
	}
	for _, kv := range records {
		if err := enc.EncodeKeyvals(kv...); err != nil {
			panic(err)
		}
		if err := enc.EndRecord(); err != nil {
			panic(err)
		}
	}
}
