// klog_lines writes klog's text format to stderr, as Kubernetes components do.
//
// Regenerate tests/correlator/sources/text/fixtures/klog.log with (Debian's
// golang-k8s-klog-dev provides the library offline):
//
//	GO111MODULE=off GOPATH=/usr/share/gocode go run klog_lines.go 2> ../fixtures/klog.log
package main

import (
	"errors"
	"flag"

	klog "k8s.io/klog" // the v2 module; Debian installs it at k8s.io/klog for GOPATH mode
)

func main() {
	klog.InitFlags(nil)
	_ = flag.Set("logtostderr", "true")
	flag.Parse()
	defer klog.Flush()

	klog.Info("Starting kubelet")
	klog.Infof("Version: %s", "v1.29.0")
	klog.InfoS("Pod status updated", "pod", klog.KRef("kube-system", "coredns-5d78c9869d-abcde"), "status", "Running", "request_id", "req-3ea4052c-895d-4b64-9e2d-04d64c4d94ab")
	klog.V(0).InfoS("Node ready", "node", klog.KRef("", "worker-1"), "allocation", "b9000564-fe1a-409b-b8cc-1e88b294cd1d")
	klog.Warning("Image garbage collection failed once")
	klog.ErrorS(errors.New("connection refused"), "Failed to contact API server", "host", "10.0.0.1:6443", "attempt", 3)
	klog.Error("multi-line error:\nsecond line\nthird line")
	klog.InfoS("Message with \"quotes\" and spaces", "key", "value with spaces", "empty", "")
}
