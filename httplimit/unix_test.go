//go:build unix

package httplimit

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/keyrate/keyrate"
)

// startUnixServer serves h on a Unix socket in a fresh directory and
// returns the socket's path. The server is shut down when the test ends.
func startUnixServer(t *testing.T, h http.Handler) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "s.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatalf("listen on %s: %v", path, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Errorf("server close: %v", err)
		}
		if err := <-done; err != http.ErrServerClosed {
			t.Errorf("Serve returned %v, want http.ErrServerClosed", err)
		}
	})
	return path
}

// unixClient returns a client whose connections go to the socket at path,
// from a socket bound to local ("": unbound; "@name": abstract).
func unixClient(t *testing.T, path, local string) *http.Client {
	t.Helper()
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		d := net.Dialer{}
		if local != "" {
			d.LocalAddr = &net.UnixAddr{Name: local, Net: "unix"}
		}
		return d.DialContext(ctx, "unix", path)
	}}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

// TestUnixSocket serves the default middleware (ByIP) on a real Unix
// socket. net/http sets RemoteAddr to the peer's socket name: "" for an
// unbound client, else the path or "@name" it bound. Every peer of the
// socket is one local client with one key, "unix:" and the socket's path:
// they share one bucket, never a 500.
func TestUnixSocket(t *testing.T) {
	h, _, _ := newLimited(t, keyrate.PerMinute(3))
	var mu sync.Mutex
	var remotes []string
	path := startUnixServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		remotes = append(remotes, r.RemoteAddr)
		mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	onSocket := func(remote string) *http.Request {
		r := request(remote)
		return r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, &net.UnixAddr{Name: path, Net: "unix"}))
	}
	for remote, want := range map[string]string{
		"":               "unix:" + path,
		"@":              "unix:" + path,
		"/run/peer.sock": "unix:" + path,
		// A peer may bind its socket to a path that reads as an address
		// (or a middleware may write one): never read as its key.
		"203.0.113.9:80": "unix:" + path,
	} {
		if key, err := ipKeyFunc(t)(onSocket(remote)); err != nil || key != want {
			t.Errorf("ByIP's key for a Unix-socket request from %q = %q, %v; want %q", remote, key, err, want)
		}
	}
	locals := []string{"", filepath.Join(t.TempDir(), "client.sock"), "", ""}
	if runtime.GOOS == "linux" {
		locals[2] = fmt.Sprintf("@keyrate-test-%d", os.Getpid()) // abstract: Linux only
	}
	want := []int{200, 200, 200, 429}
	for i, local := range locals {
		resp, err := unixClient(t, path, local).Get("http://unix/")
		if err != nil {
			t.Fatalf("request %d from %q: %v", i, local, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want[i] {
			t.Errorf("request %d from %q: status %d, want %d (one bucket for the socket)", i, local, resp.StatusCode, want[i])
		}
	}
	mu.Lock()
	defer mu.Unlock()
	// An unbound peer is "" ("@" on Linux, as an empty abstract name).
	if len(remotes) != len(locals) || remotes[0] != "" && remotes[0] != "@" || remotes[1] != locals[1] || locals[2] != "" && remotes[2] != locals[2] {
		t.Errorf("RemoteAddr values %q; want \"\" or \"@\", the bound path and the abstract name", remotes)
	}
	t.Logf("RemoteAddr values: %q", remotes)
}

// TestUnixPeerCannotChooseKey: a local peer that binds its socket to a
// relative path that reads as "IP:port" (net/http puts that path in
// RemoteAddr) still shares the socket's one bucket: binding a new name per
// connection buys it nothing.
func TestUnixPeerCannotChooseKey(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("binds client sockets to relative paths; checked on Linux")
	}
	h, _, _ := newLimited(t, keyrate.PerMinute(3))
	path := startUnixServer(t, h)
	t.Chdir(t.TempDir()) // the peer binds relative names here
	allowed := 0
	for i := range 10 {
		local := fmt.Sprintf("198.51.100.%d:1", i+1) // a relative pathname, not an address
		resp, err := unixClient(t, path, local).Get("http://unix/")
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			allowed++
		}
	}
	if allowed != 3 {
		t.Fatalf("%d of 10 requests from one local peer were allowed under PerMinute(3), want 3: the peer chose its key by naming its socket", allowed)
	}
}
