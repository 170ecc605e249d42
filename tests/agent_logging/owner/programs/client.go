// client makes one Go standard-library call fail and prints err.Error() on stderr (exit 1).
//
// Build (stdlib only): GOFLAGS=-mod=mod GOPROXY=off GOTOOLCHAIN=local go build -o client client.go
//
//	client get URL [CA.pem]   net/http GET (a non-2xx answer is reported as "unexpected status: 401 Unauthorized")
//	client tls HOST:PORT SERVERNAME [CA.pem]   crypto/tls Dial
//	client dial HOST:PORT     net.Dial("tcp", ...)
//	client exec NAME ARGS...  os/exec Command(...).Run()
//	client read PATH          os.ReadFile
//	client write PATH         os.WriteFile of 64 KiB
package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"time"
)

func tlsConfig(caPath string, serverName string) *tls.Config {
	config := &tls.Config{ServerName: serverName}
	if caPath != "" {
		pem, err := os.ReadFile(caPath)
		if err != nil {
			fail(err)
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(pem)
		config.RootCAs = pool
	}
	return config
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, err.Error())
	os.Exit(1)
}

func arg(i int) string {
	if len(os.Args) > i {
		return os.Args[i]
	}
	return ""
}

func main() {
	var err error
	switch os.Args[1] {
	case "get":
		client := &http.Client{
			Timeout:   10 * time.Second,
			Transport: &http.Transport{TLSClientConfig: tlsConfig(arg(3), "")},
		}
		var resp *http.Response
		resp, err = client.Get(os.Args[2])
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode >= 300 {
				err = fmt.Errorf("unexpected status: %s", resp.Status)
			}
		}
	case "tls":
		var conn *tls.Conn
		conn, err = tls.Dial("tcp", os.Args[2], tlsConfig(arg(4), os.Args[3]))
		if err == nil {
			conn.Close()
		}
	case "dial":
		var conn net.Conn
		conn, err = net.DialTimeout("tcp", os.Args[2], 5*time.Second)
		if err == nil {
			conn.Close()
		}
	case "exec":
		err = exec.Command(os.Args[2], os.Args[3:]...).Run()
	case "read":
		_, err = os.ReadFile(os.Args[2])
	case "write":
		err = os.WriteFile(os.Args[2], make([]byte, 64*1024), 0o644)
	default:
		err = fmt.Errorf("unknown subcommand %q", os.Args[1])
	}
	if err != nil {
		fail(err)
	}
}
