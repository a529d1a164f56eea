// Package redistest starts throwaway redis-server processes for tests: no
// persistence, loopback only, a free port, stopped by process id when the
// test ends.
//
// When redis-server is not on PATH, Start skips the test with the reason,
// unless the environment variable KEYRATE_REQUIRE_REDIS is 1, which turns
// the skip into a failure (CI sets it, so that nothing is skipped there).
package redistest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// RequireEnv is the environment variable that turns a missing redis-server
// into a test failure instead of a skip.
const RequireEnv = "KEYRATE_REQUIRE_REDIS"

// readyWithin bounds how long Start waits for a new server to answer PING.
const readyWithin = 10 * time.Second

// Server is one redis-server process that a test started. Its methods are
// safe for concurrent use.
type Server struct {
	t    testing.TB
	bin  string
	port int
	args []string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has been waited for
	log  *bytes.Buffer
}

// Binary returns the path of redis-server, or skips tb (fails it when
// RequireEnv is 1) if there is none.
func Binary(tb testing.TB) string {
	tb.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv(RequireEnv) == "1" {
			tb.Fatalf("redis-server not found on PATH and %s=1: %v", RequireEnv, err)
		}
		tb.Skipf("redis-server not found on PATH (%v); install it (apt-get install redis-server) or set %s=1 to make this a failure", err, RequireEnv)
	}
	return bin
}

// Start starts a redis-server on a free loopback port, with no persistence
// and the DEBUG command enabled, waits until it answers PING, and stops it
// when tb ends. extra is appended to the command line (for example
// "--cluster-enabled", "yes").
func Start(tb testing.TB, extra ...string) *Server {
	tb.Helper()
	bin := Binary(tb)
	port, err := freePort()
	if err != nil {
		tb.Fatalf("redistest: no free port: %v", err)
	}
	s := &Server{t: tb, bin: bin, port: port}
	s.args = append([]string{
		"--port", strconv.Itoa(port),
		"--bind", "127.0.0.1",
		"--save", "",
		"--appendonly", "no",
		"--enable-debug-command", "yes",
		"--dir", tb.TempDir(),
	}, extra...)
	tb.Cleanup(s.Kill)
	if err := s.start(); err != nil {
		tb.Fatalf("redistest: %v", err)
	}
	return s
}

// Addr returns the server's address, 127.0.0.1:port. It stays the same
// across Restart.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// Port returns the server's port.
func (s *Server) Port() int { return s.port }

// Pid returns the running process's id, or 0 if it is not running.
func (s *Server) Pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// Kill stops the server with SIGKILL, by the process id Start recorded,
// and waits for it to exit. It is a no-op if the server is not running.
func (s *Server) Kill() {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Kill()
	<-done
}

// Restart starts the server again on the same port, after Kill. The new
// server starts empty.
func (s *Server) Restart() {
	s.t.Helper()
	if err := s.start(); err != nil {
		s.t.Fatalf("redistest: restart: %v", err)
	}
}

func (s *Server) start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return errors.New("server already running")
	}
	var log bytes.Buffer
	cmd := exec.Command(s.bin, s.args...)
	cmd.Stdout = &log
	cmd.Stderr = &log
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", s.bin, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	deadline := time.Now().Add(readyWithin)
	for {
		err := ping(s.Addr())
		if err == nil {
			break
		}
		select {
		case <-done:
			return fmt.Errorf("redis-server exited before answering PING: %v\n%s", err, log.String())
		default:
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			<-done
			return fmt.Errorf("redis-server did not answer PING within %v: %v\n%s", readyWithin, err, log.String())
		}
		// Poll again: a fresh connection attempt, not a sleep for time.
	}
	s.cmd, s.done, s.log = cmd, done, &log
	return nil
}

// ping sends one PING on a fresh connection and reads +PONG.
func ping(addr string) error {
	c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if strings.TrimSpace(line) != "+PONG" {
		return fmt.Errorf("PING answered %q", strings.TrimSpace(line))
	}
	return nil
}

// freePort asks the kernel for a free loopback port. Another process could
// take it before redis-server binds it; Start then fails with the log.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
