// n_goclient: one HTTP request with Go's net/http, printed as JSON, so the incident
// generators (n_lab.py) can log the exact error text a Go service sees.
// Usage: n_goclient METHOD URL CA_PEM TIMEOUT_S [BODY] [HEADER:VALUE...]
package main

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

func main() {
	method, url, caPath := os.Args[1], os.Args[2], os.Args[3]
	timeout, _ := strconv.ParseFloat(os.Args[4], 64)
	var body io.Reader
	if len(os.Args) > 5 && os.Args[5] != "" {
		body = strings.NewReader(os.Args[5])
	}
	pool := x509.NewCertPool()
	if caPath != "" {
		pem, err := os.ReadFile(caPath)
		if err == nil {
			pool.AppendCertsFromPEM(pem)
		}
	}
	client := &http.Client{
		Timeout:   time.Duration(timeout * float64(time.Second)),
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}},
	}
	out := map[string]any{}
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		out["error"] = err.Error()
	} else {
		req.Header.Set("User-Agent", "bmagent/2.14.3 (linux; go1.19)")
		req.Header.Set("Content-Type", "application/json")
		extra := []string{}
		if len(os.Args) > 6 {
			extra = os.Args[6:]
		}
		for _, h := range extra {
			k, v, _ := strings.Cut(h, ":")
			req.Header.Set(k, v)
		}
		resp, err := client.Do(req)
		if err != nil {
			out["error"] = err.Error()
		} else {
			data, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			out["status"] = resp.StatusCode
			out["status_text"] = resp.Status
			out["body"] = string(data)
			headers := map[string]string{}
			for k := range resp.Header {
				headers[strings.ToLower(k)] = resp.Header.Get(k)
			}
			out["headers"] = headers
		}
	}
	json.NewEncoder(os.Stdout).Encode(out)
}
