// Package testredis starts throwaway redis-server processes for the
// tests and the load generator of this module: no persistence, loopback
// only, stopped when the test (or the caller) is done.
//
// When redis-server is not on PATH, Start skips the test, unless the
// environment variable KEYRATE_REQUIRE_REDIS is 1 (CI sets it), which
// makes it fail instead.
package testredis

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/keyrate/keyrate/ratelimitsvc/internal/rlsproc"
)

// Server is one redis-server process.
type Server struct {
	Addr string
	cmd  *exec.Cmd
	bin  string
	dir  string
	port int
}

// Start starts a redis-server on a free loopback port for tb and stops it
// when tb ends; or skips tb (fails it when KEYRATE_REQUIRE_REDIS is 1)
// without redis-server.
func Start(tb testing.TB) *Server {
	tb.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("KEYRATE_REQUIRE_REDIS") == "1" {
			tb.Fatal("redis-server is not on PATH, and KEYRATE_REQUIRE_REDIS=1")
		}
		tb.Skip("redis-server is not on PATH (apt-get install redis-server)")
	}
	s, err := Run(bin, tb.TempDir())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(s.Stop)
	return s
}

// Run starts redis-server bin with its working directory dir, on a free
// loopback port, and waits until it answers PING. Stop it with Stop.
func Run(bin, dir string) (*Server, error) {
	var last error
	for range 5 {
		port, err := rlsproc.FreePort()
		if err != nil {
			return nil, err
		}
		s := &Server{Addr: fmt.Sprintf("127.0.0.1:%d", port), bin: bin, dir: dir, port: port}
		if last = s.start(); last == nil {
			return s, nil
		}
	}
	return nil, fmt.Errorf("redis-server did not start: %w", last)
}

// start starts the server's process and waits until it answers PING.
func (s *Server) start() error {
	s.cmd = exec.Command(s.bin, "--port", fmt.Sprint(s.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", s.dir, "--maxmemory-policy", "noeviction")
	if err := s.cmd.Start(); err != nil {
		return err
	}
	if err := s.waitPing(10 * time.Second); err != nil {
		s.Stop()
		return err
	}
	return nil
}

// Restart starts a server stopped with Stop again, empty, at the same
// address.
func (s *Server) Restart() error { return s.start() }

// Pid returns the server's process ID.
func (s *Server) Pid() int { return s.cmd.Process.Pid }

// Stop kills the server and waits for it.
func (s *Server) Stop() {
	if s.cmd.Process != nil {
		_ = s.cmd.Process.Kill()
		_ = s.cmd.Wait()
	}
}

// FlushAll empties the server.
func (s *Server) FlushAll() error {
	_, err := s.do("FLUSHALL")
	return err
}

func (s *Server) waitPing(limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		r, err := s.do("PING")
		if err == nil && r == "+PONG" {
			return nil
		}
		if time.Now().After(deadline) {
			if err == nil {
				err = fmt.Errorf("PING answered %q", r)
			}
			return err
		}
		time.Sleep(20 * time.Millisecond) // the process starting: nothing to wait on but polling
	}
}

// do sends one inline command and returns the reply's first line.
func (s *Server) do(cmd string) (string, error) {
	c, err := net.DialTimeout("tcp", s.Addr, time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := fmt.Fprintf(c, "%s\r\n", cmd); err != nil {
		return "", err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	line = strings.TrimRight(line, "\r\n")
	if err == nil && strings.HasPrefix(line, "-") {
		err = errors.New(line)
	}
	return line, err
}
