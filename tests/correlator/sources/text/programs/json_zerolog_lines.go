// json_zerolog_lines writes zerolog's output (JSON) to stderr: its default RFC 3339 times, RFC
// 3339 with nanoseconds, and the UNIX times it offers (seconds, milliseconds, microseconds).
//
// Regenerate tests/correlator/sources/text/fixtures/json_zerolog.log with (Debian's
// golang-github-rs-zerolog-dev provides the library offline):
//
//	TZ=Europe/Berlin GO111MODULE=off GOPATH=/usr/share/gocode go run json_zerolog_lines.go 2> ../fixtures/json_zerolog.log
package main

import (
	"errors"
	"os"
	"time"

	"github.com/rs/zerolog"
)

func main() {
	logger := zerolog.New(os.Stderr).With().Timestamp().Str("host", "worker-1").Logger()

	logger.Info().Msg("service started")
	logger.Debug().Str("request_id", "req-3ea4052c-895d-4b64-9e2d-04d64c4d94ab").
		Str("trace_id", "4bf92f3577b34da6a3ce929d0e0e4736").Msg("handling request")
	logger.Error().Err(errors.New("boom: disk full")).Int("attempt", 3).Msg("write failed")
	logger.Warn().Dict("http", zerolog.Dict().Str("method", "GET").Int("status", 503)).
		Strs("tags", []string{"x", "y"}).Float64("ratio", 0.25).Msg("slow \"spawn\"\nsecond line")
	logger.Info().Str("instance", "b9000564-fe1a-409b-b8cc-1e88b294cd1d").Send() // no message

	for _, format := range []string{
		time.RFC3339Nano,
		zerolog.TimeFormatUnix,
		zerolog.TimeFormatUnixMs,
		zerolog.TimeFormatUnixMicro,
	} {
		zerolog.TimeFieldFormat = format
		logger.Info().Str("time_format", format).Msg("another time format")
	}
}
