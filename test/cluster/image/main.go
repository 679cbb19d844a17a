// bpbox is the only program in the cluster tier's test images (scripts/cluster-test-image.sh
// packs it into two image archives). It runs as:
//
//	bpbox pause   the pod sandbox ("pause") container: sleeps, reaps zombies, exits on SIGTERM/SIGINT
//	bpbox serve   an HTTP server on $PORT (default 8080) that reports what the kubelet applied,
//	              from inside the container, so the tests observe the pod spec rather than trust it
//
// Endpoints of serve:
//
//	/healthz   200, or 500 once /tmp/unhealthy exists or $FAIL_LIVENESS_AFTER seconds passed
//	/ready     200 once /tmp/ready exists or $READY_AFTER seconds passed, else 503
//	/whoami    JSON: uid, gid, CapEff, NoNewPrivs, $SECRET_VALUE, hostname, memory limit, whether / and
//	           /scratch (an emptyDir) are writable
//	/fetch     GET ?url=…, answers the status and body (pod → Service)
//	/kube      in-cluster config: the ServiceAccount token and CA against https://$KUBERNETES_SERVICE_HOST,
//	           POST a SelfSubjectReview and answer the username the API server saw
//	/touch     creates ?path=… (makes /tmp/ready or /tmp/unhealthy)
//
// On SIGTERM serve writes "SIGTERM <unix ms>" to $TERM_MARKER (a hostPath file) when set, then
// exits after $TERM_DELAY_MS.
package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: bpbox pause|serve")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "pause":
		pause()
	case "serve":
		serve()
	default:
		fmt.Fprintln(os.Stderr, "unknown mode", os.Args[1])
		os.Exit(2)
	}
}

func pause() {
	signals := make(chan os.Signal, 4)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for sig := range signals {
		if sig == syscall.SIGCHLD {
			for {
				var status syscall.WaitStatus
				pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
				if pid <= 0 || err != nil {
					break
				}
			}
			continue
		}
		os.Exit(0)
	}
}

func envSeconds(name string) (time.Duration, bool) {
	v, err := strconv.Atoi(os.Getenv(name))
	if err != nil {
		return 0, false
	}
	return time.Duration(v) * time.Second, true
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

func statusField(name string) string {
	data, _ := os.ReadFile("/proc/self/status")
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, name+":") {
			return strings.TrimSpace(strings.TrimPrefix(line, name+":"))
		}
	}
	return ""
}

func writable(dir string) string {
	f := dir + "/.bpbox-write-test"
	if err := os.WriteFile(f, []byte("x"), 0o600); err != nil {
		return err.Error()
	}
	os.Remove(f)
	return "ok"
}

func memoryLimit() string {
	// cgroup v1 (the machine here) and v2, as the container sees its own cgroup.
	for _, p := range []string{"/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory.max"} {
		if data, err := os.ReadFile(p); err == nil {
			return strings.TrimSpace(string(data))
		}
	}
	return ""
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("content-type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func serve() {
	started := time.Now()
	port := os.Getenv("PORT")
	if port == "" {
		port = "8080"
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		after, set := envSeconds("FAIL_LIVENESS_AFTER")
		if exists("/tmp/unhealthy") || (set && time.Since(started) > after) {
			http.Error(w, "unhealthy", 500)
			return
		}
		io.WriteString(w, "ok")
	})
	mux.HandleFunc("/ready", func(w http.ResponseWriter, r *http.Request) {
		after, set := envSeconds("READY_AFTER")
		if exists("/tmp/ready") || (set && time.Since(started) > after) {
			io.WriteString(w, "ready")
			return
		}
		http.Error(w, "not ready", 503)
	})
	mux.HandleFunc("/touch", func(w http.ResponseWriter, r *http.Request) {
		if err := os.WriteFile(r.URL.Query().Get("path"), nil, 0o600); err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		io.WriteString(w, "ok")
	})
	mux.HandleFunc("/whoami", func(w http.ResponseWriter, r *http.Request) {
		hostname, _ := os.Hostname()
		writeJSON(w, 200, map[string]any{
			"uid":          os.Getuid(),
			"gid":          os.Getgid(),
			"capEff":       statusField("CapEff"),
			"noNewPrivs":   statusField("NoNewPrivs"),
			"secretValue":  os.Getenv("SECRET_VALUE"),
			"hostname":     hostname,
			"memoryLimit":  memoryLimit(),
			"rootWrite":    writable("/"),
			"scratchWrite": writable("/scratch"),
			"pid":          os.Getpid(),
		})
	})
	mux.HandleFunc("/fetch", func(w http.ResponseWriter, r *http.Request) {
		client := http.Client{Timeout: 5 * time.Second}
		resp, err := client.Get(r.URL.Query().Get("url"))
		if err != nil {
			writeJSON(w, 502, map[string]any{"error": err.Error()})
			return
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		writeJSON(w, 200, map[string]any{"status": resp.StatusCode, "body": string(body)})
	})
	mux.HandleFunc("/kube", func(w http.ResponseWriter, r *http.Request) {
		const sa = "/var/run/secrets/kubernetes.io/serviceaccount"
		token, err := os.ReadFile(sa + "/token")
		if err != nil {
			writeJSON(w, 500, map[string]any{"error": err.Error()})
			return
		}
		ca, err := os.ReadFile(sa + "/ca.crt")
		if err != nil {
			writeJSON(w, 500, map[string]any{"error": err.Error()})
			return
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(ca)
		client := http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
		url := "https://" + os.Getenv("KUBERNETES_SERVICE_HOST") + ":" + os.Getenv("KUBERNETES_SERVICE_PORT") +
			"/apis/authentication.k8s.io/v1/selfsubjectreviews"
		req, _ := http.NewRequest("POST", url, bytes.NewBufferString(`{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}`))
		req.Header.Set("authorization", "Bearer "+strings.TrimSpace(string(token)))
		req.Header.Set("content-type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			writeJSON(w, 502, map[string]any{"error": err.Error(), "url": url})
			return
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		writeJSON(w, 200, map[string]any{"status": resp.StatusCode, "url": url, "body": json.RawMessage(body)})
	})

	server := &http.Server{Addr: ":" + port, Handler: mux}
	go func() {
		signals := make(chan os.Signal, 1)
		signal.Notify(signals, syscall.SIGTERM)
		<-signals
		if marker := os.Getenv("TERM_MARKER"); marker != "" {
			os.WriteFile(marker, []byte(fmt.Sprintf("SIGTERM %d\n", time.Now().UnixMilli())), 0o644)
		}
		fmt.Println("bpbox: SIGTERM")
		if delay, err := strconv.Atoi(os.Getenv("TERM_DELAY_MS")); err == nil {
			time.Sleep(time.Duration(delay) * time.Millisecond)
		}
		os.Exit(0)
	}()
	fmt.Println("bpbox: serving on :" + port)
	if err := server.ListenAndServe(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
