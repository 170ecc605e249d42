// json_zap_lines writes zap's JSON encoder output to stderr, as Go services configured with
// zap print it: the production encoder (epoch seconds in "ts"), the development encoder set to
// JSON (one-letter keys, ISO 8601 times in "T"), and the production encoder with the other
// time encoders a service may pick (ISO 8601, RFC 3339 with nanoseconds, epoch milliseconds,
// epoch nanoseconds).
//
// Regenerate tests/correlator/sources/text/fixtures/json_zap.log with (Debian's
// golang-go.uber-zap-dev provides the library offline; TZ gives the ISO 8601 times an offset):
//
//	TZ=Europe/Berlin GO111MODULE=off GOPATH=/usr/share/gocode go run json_zap_lines.go 2> ../fixtures/json_zap.log
package main

import (
	"errors"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

func build(config zap.Config) *zap.Logger {
	logger, err := config.Build()
	if err != nil {
		panic(err)
	}
	return logger
}

func main() {
	production := build(zap.NewProductionConfig())
	production.Info("service started", zap.String("host", "worker-1"), zap.Int("port", 8080))
	production.Info("request handled",
		zap.String("request_id", "req-3ea4052c-895d-4b64-9e2d-04d64c4d94ab"),
		zap.String("trace_id", "4bf92f3577b34da6a3ce929d0e0e4736"),
		zap.Int("status", 200), zap.Duration("latency", 1234*time.Microsecond),
		zap.Bool("cached", false), zap.Strings("tags", []string{"a", "b"}))
	// An error level adds a "stacktrace" with newlines in it.
	production.Error("upstream failed",
		zap.Error(errors.New("dial tcp 10.0.0.1:443: i/o timeout")),
		zap.String("request_id", "req-3ea4052c-895d-4b64-9e2d-04d64c4d94ab"))
	// A namespace nests the fields after it in an object.
	production.Named("http").With(zap.Namespace("http")).Warn("slow \"spawn\"",
		zap.String("method", "POST"), zap.String("instance", "b9000564-fe1a-409b-b8cc-1e88b294cd1d"))
	_ = production.Sync()

	development := zap.NewDevelopmentConfig()
	development.Encoding = "json"
	developer := build(development)
	developer.Debug("handling request", zap.String("request_id", "req-3ea4052c-895d-4b64-9e2d-04d64c4d94ab"))
	developer.Named("db").Info("query done", zap.Int("rows", 3))
	_ = developer.Sync()

	for _, encoder := range []zapcore.TimeEncoder{
		zapcore.ISO8601TimeEncoder,
		zapcore.RFC3339NanoTimeEncoder,
		zapcore.EpochMillisTimeEncoder,
		zapcore.EpochNanosTimeEncoder,
	} {
		config := zap.NewProductionConfig()
		config.EncoderConfig.EncodeTime = encoder
		logger := build(config)
		logger.Info("another time encoder", zap.String("host", "worker-1"))
		_ = logger.Sync()
	}
}
