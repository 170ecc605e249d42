// w_nodeagent: the node agent's failing operations, run for real to capture the error text a
// Go agent prints (tests/incidents/w-* cases). Not a node agent: each subcommand performs one
// operation the way an agent would and prints one JSON line {"op", "error", "stderr", "line"}
// where "line" is a log record as the agent's hand-rolled JSON logger writes it.
//
//	go run w_nodeagent.go power-on ROOT BMC      exec ipmitool (PATH without it, or with it)
//	go run w_nodeagent.go write-image ROOT PATH  stream an image into PATH (a symlink to /dev/full)
//	go run w_nodeagent.go persist-state PATH     the error os.Rename gives on a read-only fs (EROFS)
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"
)

type result struct {
	Op     string         `json:"op"`
	Error  string         `json:"error"`
	Stderr string         `json:"stderr,omitempty"`
	Line   map[string]any `json:"line"`
}

func record(level, event string, err error) map[string]any {
	line := map[string]any{
		"ts":      time.Now().UTC().Format(time.RFC3339Nano),
		"level":   level,
		"event":   event,
		"service": "node-agent",
		"layer":   "node",
	}
	if err != nil {
		line["error"] = err.Error()
	}
	return line
}

func emit(r result) {
	out, _ := json.Marshal(r)
	fmt.Println(string(out))
}

func powerOn(path, bmc string) {
	os.Setenv("PATH", path)
	cmd := exec.Command("ipmitool", "-I", "lanplus", "-H", bmc, "-U", "admin", "-E",
		"-N", "1", "-R", "2", "chassis", "power", "on")
	cmd.Env = append(os.Environ(), "IPMI_PASSWORD=not-a-real-password")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	r := result{Op: "power-on", Stderr: stderr.String()}
	if err != nil {
		r.Error = err.Error()
		var exitErr *exec.ExitError
		if errors.As(err, &exitErr) {
			r.Line = record("error", "bmc power on failed", err)
		} else {
			r.Line = record("error", "power on failed", err)
		}
	}
	emit(r)
}

func writeImage(path string) {
	out, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	r := result{Op: "write-image"}
	if err == nil {
		chunk := bytes.Repeat([]byte{0x51}, 4<<20)
		_, err = io.Copy(out, bytes.NewReader(chunk))
		out.Close()
	}
	if err != nil {
		r.Error = err.Error()
		r.Line = record("error", "image download failed", err)
	}
	emit(r)
}

func persistState(path string) {
	// A read-only remount cannot be made here without mount(2): the error is the one
	// os.Rename returns for EROFS, built from the real errno.
	err := &os.LinkError{Op: "rename", Old: path + ".tmp", New: path, Err: syscall.EROFS}
	emit(result{Op: "persist-state", Error: err.Error(), Line: record("error", "persist task state failed", err)})
	open := &os.PathError{Op: "open", Path: path + ".tmp", Err: syscall.EROFS}
	emit(result{Op: "persist-state-open", Error: open.Error(), Line: record("error", "persist task state failed", open)})
}

func main() {
	switch os.Args[1] {
	case "power-on":
		powerOn(os.Args[2], os.Args[3])
	case "write-image":
		writeImage(os.Args[2])
	case "persist-state":
		persistState(os.Args[2])
	}
}
