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
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
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

	// tempDir, if set, is removed by Kill: the directory of a server no
	// test's TempDir holds (a shared cluster's).
	tempDir string

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
	s, err := launch(tb, Binary(tb), tb.TempDir(), extra...)
	if err != nil {
		tb.Fatalf("redistest: %v", err)
	}
	tb.Cleanup(s.Kill)
	return s
}

// launch starts bin on a free loopback port with its files in dir, as
// Start describes, for tb (nil: no test; Restart then cannot report).
func launch(tb testing.TB, bin, dir string, extra ...string) (*Server, error) {
	// Another process (tests run in parallel packages) can take the free
	// port before redis-server binds it: then try another.
	for attempt := 1; ; attempt++ {
		port, err := freePort()
		if err != nil {
			return nil, fmt.Errorf("no free port: %w", err)
		}
		s := &Server{t: tb, bin: bin, port: port}
		s.args = append([]string{
			"--port", strconv.Itoa(port),
			"--bind", "127.0.0.1",
			"--save", "",
			"--appendonly", "no",
			"--enable-debug-command", "yes",
			"--dir", dir,
		}, extra...)
		err = s.start()
		if err == nil {
			return s, nil
		}
		if attempt == 5 || !strings.Contains(err.Error(), "Address already in use") {
			return nil, err
		}
	}
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
	if cmd != nil {
		_ = cmd.Process.Kill()
		<-done
	}
	if s.tempDir != "" {
		_ = os.RemoveAll(s.tempDir)
	}
}

// Stop suspends the server with SIGSTOP, by its process id: it keeps its
// port and the kernel still accepts connections and takes in what clients
// send, but nothing is answered until Cont, a hung server. Stop registers
// a Cont for when tb ends, so that the server is never left stopped. It
// fails tb if the server is not running.
func (s *Server) Stop(tb testing.TB) {
	tb.Helper()
	s.signal(tb, syscall.SIGSTOP)
	tb.Cleanup(func() { s.Cont(tb) })
}

// Cont resumes a server that Stop suspended, with SIGCONT; it is a no-op
// for a server that is running (or was killed).
func (s *Server) Cont(tb testing.TB) {
	tb.Helper()
	if s.Pid() != 0 {
		s.signal(tb, syscall.SIGCONT)
	}
}

func (s *Server) signal(tb testing.TB, sig syscall.Signal) {
	tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		tb.Fatalf("redistest: %v: the server is not running", sig)
	}
	if err := s.cmd.Process.Signal(sig); err != nil {
		tb.Fatalf("redistest: %v: %v", sig, err)
	}
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
	// The PING may have been answered by another process's server on
	// the port (one that took the free port, or a killed server's, before
	// this one bound it, which then exits): only our own process will do.
	if pid, err := serverPid(s.Addr()); err != nil || pid != cmd.Process.Pid {
		_ = cmd.Process.Kill()
		<-done
		if err != nil {
			return fmt.Errorf("INFO server: %v\n%s", err, log.String())
		}
		return fmt.Errorf("port %d: Address already in use by another redis-server (pid %d, not ours, %d)\n%s", s.port, pid, cmd.Process.Pid, log.String())
	}
	s.cmd, s.done, s.log = cmd, done, &log
	return nil
}

// serverPid returns the process id of the redis-server answering at addr.
func serverPid(addr string) (int, error) {
	info, err := command(addr, 10*time.Second, "INFO", "server")
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(line, "process_id:"); ok {
			return strconv.Atoi(strings.TrimSpace(v))
		}
	}
	return 0, fmt.Errorf("no process_id in %q", info)
}

// Pause makes the server take in no command from any client (CLIENT
// PAUSE ALL) for d, and returns once the pause is in effect: a command any
// client sends before it ends is answered only after it, however long the
// caller's timeout. Kill ends a pause early; Redis 7.0 postpones even
// CLIENT UNPAUSE.
func (s *Server) Pause(tb testing.TB, d time.Duration) {
	tb.Helper()
	reply, err := command(s.Addr(), 10*time.Second, "CLIENT", "PAUSE", strconv.FormatInt(d.Milliseconds(), 10), "ALL")
	if err != nil || reply != "OK" {
		tb.Fatalf("redistest: CLIENT PAUSE: %q, %v", reply, err)
	}
}

// StartCluster starts a redis-server in cluster mode, as Start does, and
// makes it a one-node cluster that holds every slot, waiting until the
// cluster is ok.
func StartCluster(tb testing.TB, extra ...string) *Server {
	tb.Helper()
	s := Start(tb, append([]string{"--cluster-enabled", "yes"}, extra...)...)
	if reply, err := command(s.Addr(), 10*time.Second, "CLUSTER", "ADDSLOTSRANGE", "0", "16383"); err != nil || reply != "OK" {
		tb.Fatalf("redistest: CLUSTER ADDSLOTSRANGE: %q, %v", reply, err)
	}
	deadline := time.Now().Add(readyWithin)
	for {
		info, err := command(s.Addr(), 10*time.Second, "CLUSTER", "INFO")
		if err == nil && strings.Contains(info, "cluster_state:ok") {
			return s
		}
		if time.Now().After(deadline) {
			tb.Fatalf("redistest: the one-node cluster is not ok within %v: %q, %v", readyWithin, info, err)
		}
		// Poll again: the node takes a moment to see its slots assigned.
	}
}

// ping sends one PING on a fresh connection and reads +PONG.
func ping(addr string) error {
	reply, err := command(addr, time.Second, "PING")
	if err != nil {
		return err
	}
	if reply != "PONG" {
		return fmt.Errorf("PING answered %q", reply)
	}
	return nil
}

// command sends one command on a fresh connection and returns its reply, a
// simple or bulk string; an error reply is an error. within bounds the
// whole exchange.
func command(addr string, within time.Duration, args ...string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, within)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(within))
	var req strings.Builder
	fmt.Fprintf(&req, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&req, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := c.Write([]byte(req.String())); err != nil {
		return "", err
	}
	r := bufio.NewReader(c)
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimSuffix(line, "\r\n")
	switch {
	case strings.HasPrefix(line, "+"):
		return line[1:], nil
	case strings.HasPrefix(line, "-"):
		return "", errors.New(line[1:])
	case strings.HasPrefix(line, "$"):
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < 0 {
			return "", fmt.Errorf("bad bulk reply %q", line)
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	}
	return "", fmt.Errorf("unexpected reply %q", line)
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
