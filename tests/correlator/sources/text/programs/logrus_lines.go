// logrus_lines writes logrus's text formatter output (logfmt) to stderr.
//
// Regenerate tests/correlator/sources/text/fixtures/logfmt_logrus.log with (Debian's
// golang-github-sirupsen-logrus-dev provides the library offline):
//
//	GO111MODULE=off GOPATH=/usr/share/gocode go run logrus_lines.go 2> ../fixtures/logfmt_logrus.log
package main

import (
	"errors"
	"os"

	"github.com/sirupsen/logrus"
)

func main() {
	logger := logrus.New()
	logger.Out = os.Stderr
	// Not a terminal: logrus writes logfmt; FullTimestamp and RFC 3339 with nanoseconds.
	logger.Formatter = &logrus.TextFormatter{DisableColors: true, FullTimestamp: true, TimestampFormat: "2006-01-02T15:04:05.000000000Z07:00"}
	logger.Level = logrus.DebugLevel

	logger.Info("service started")
	logger.WithFields(logrus.Fields{"request_id": "req-3ea4052c-895d-4b64-9e2d-04d64c4d94ab", "host": "worker-1"}).Debug("handling request")
	logger.WithError(errors.New("boom: disk full")).Error("write failed")
	logger.WithField("instance", "b9000564-fe1a-409b-b8cc-1e88b294cd1d").Warn("slow \"spawn\"")

	// The default formatter (no FullTimestamp options) writes RFC 3339 seconds.
	logger.Formatter = &logrus.TextFormatter{DisableColors: true}
	logger.WithField("component", "default-formatter").Info("second form")
}
