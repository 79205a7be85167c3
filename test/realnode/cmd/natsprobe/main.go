// Command natsprobe is the client pod of the real-node suite
// (test/realnode): it serves HTTP on :8080 and, for each request, dials
// from the pod's own network namespace, so a NetworkPolicy applies to its
// connections as to any client pod's.
//
//	GET /nats?addr=HOST:PORT   dial, read the server's INFO line
//	GET /http?url=URL          an HTTP GET, its status and first bytes
//
// Each answers JSON {"ok": bool, "detail": "...", "error": "..."}, status
// 200 either way: a refused connection is a result, not a failure of the
// probe. Dials time out after 3 s (a NetworkPolicy's dropped SYN shows as
// that timeout).
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"strings"
	"time"
)

const timeout = 3 * time.Second

type result struct {
	OK     bool   `json:"ok"`
	Detail string `json:"detail,omitempty"`
	Error  string `json:"error,omitempty"`
}

func main() {
	http.HandleFunc("/nats", func(w http.ResponseWriter, r *http.Request) {
		reply(w, dialNATS(r.URL.Query().Get("addr")))
	})
	http.HandleFunc("/http", func(w http.ResponseWriter, r *http.Request) {
		reply(w, get(r.URL.Query().Get("url")))
	})
	http.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	log.Fatal(http.ListenAndServe(":8080", nil))
}

func reply(w http.ResponseWriter, res result) {
	log.Printf("%+v", res)
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(res)
}

// dialNATS connects to a NATS server's client port and reads its INFO.
func dialNATS(addr string) result {
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return result{Error: err.Error()}
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(timeout))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return result{Error: "connected, but reading INFO: " + err.Error()}
	}
	if !strings.HasPrefix(line, "INFO ") {
		return result{Error: "connected, but the server said " + line}
	}
	var info struct {
		ServerName string `json:"server_name"`
		Version    string `json:"version"`
	}
	_ = json.Unmarshal([]byte(strings.TrimPrefix(strings.TrimSpace(line), "INFO ")), &info)
	return result{OK: true, Detail: fmt.Sprintf("INFO from %s (nats-server %s)", info.ServerName, info.Version)}
}

func get(url string) result {
	client := &http.Client{Timeout: timeout}
	resp, err := client.Get(url)
	if err != nil {
		return result{Error: err.Error()}
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 80))
	return result{OK: true, Detail: fmt.Sprintf("%s: %q", resp.Status, body)}
}
