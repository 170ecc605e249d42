// One HTTP request with Go's net/http client, as the hold-out cases' Go agents make it.
//
// Prints one JSON object: start_ns, end_ns, status (0 when there was no response),
// status_line (resp.Status, e.g. "503 Service Unavailable"), error (err.Error(), exactly as
// the client returned it), body, request_id (the response's X-Request-ID).
//
// Build: GO111MODULE=off go build -o h_goclient h_goclient.go (stdlib only).
package main

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"flag"
	"io"
	"net/http"
	"os"
	"strings"
	"time"
)

type headerList []string

func (h *headerList) String() string     { return strings.Join(*h, ",") }
func (h *headerList) Set(v string) error { *h = append(*h, v); return nil }

func main() {
	method := flag.String("method", "GET", "HTTP method")
	url := flag.String("url", "", "URL")
	body := flag.String("body", "", "request body (JSON)")
	timeout := flag.Duration("timeout", 5*time.Second, "http.Client.Timeout")
	cacert := flag.String("cacert", "", "PEM bundle to trust instead of the system's")
	var headers headerList
	flag.Var(&headers, "header", "\"Name: value\" (repeatable)")
	flag.Parse()

	client := &http.Client{Timeout: *timeout}
	if *cacert != "" {
		pem, err := os.ReadFile(*cacert)
		if err != nil {
			panic(err)
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(pem)
		client.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}
	}
	out := map[string]any{"start_ns": time.Now().UnixNano()}
	var reader io.Reader
	if *body != "" {
		reader = strings.NewReader(*body)
	}
	req, err := http.NewRequest(*method, *url, reader)
	if err != nil {
		panic(err)
	}
	req.Header.Set("User-Agent", "bmagent/3.2.0 (linux; go1.19)")
	if *body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for _, h := range headers {
		name, value, _ := strings.Cut(h, ": ")
		req.Header.Set(name, value)
	}
	resp, err := client.Do(req)
	if err != nil {
		out["error"] = err.Error()
		out["status"] = 0
	} else {
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		out["status"] = resp.StatusCode
		out["status_line"] = resp.Status
		out["body"] = string(data)
		out["request_id"] = resp.Header.Get("X-Request-ID")
	}
	out["end_ns"] = time.Now().UnixNano()
	json.NewEncoder(os.Stdout).Encode(out)
}
