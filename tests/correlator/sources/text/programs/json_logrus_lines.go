// json_logrus_lines writes logrus's JSON formatter output to stderr.
//
// Regenerate tests/correlator/sources/text/fixtures/json_logrus.log with (Debian's
// golang-github-sirupsen-logrus-dev provides the library offline):
//
//	TZ=Europe/Berlin GO111MODULE=off GOPATH=/usr/share/gocode go run json_logrus_lines.go 2> ../fixtures/json_logrus.log
package main

import (
	"errors"
	"os"
	"time"

	"github.com/sirupsen/logrus"
)

func main() {
	logger := logrus.New()
	logger.Out = os.Stderr
	logger.Formatter = &logrus.JSONFormatter{} // RFC 3339 seconds
	logger.Level = logrus.DebugLevel

	logger.Info("service started")
	logger.WithFields(logrus.Fields{"request_id": "req-3ea4052c-895d-4b64-9e2d-04d64c4d94ab", "host": "worker-1"}).Debug("handling request")
	logger.WithError(errors.New("boom: disk full")).WithField("trace.id", "4bf92f3577b34da6a3ce929d0e0e4736").Error("write failed")

	logger.Formatter = &logrus.JSONFormatter{TimestampFormat: time.RFC3339Nano}
	logger.WithField("instance", "b9000564-fe1a-409b-b8cc-1e88b294cd1d").Warn("slow \"spawn\"")
	logger.WithField("attempt", 2).WithField("ok", true).Info("retried")
}
