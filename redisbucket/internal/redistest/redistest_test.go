package redistest

import (
	"strings"
	"testing"
)

// TestStartOnTakenPort: a server started on a port where another
// redis-server already answers (another test process took the free port,
// or the port of a killed server, before this one bound it) fails to
// start, and is not taken for the server answering there: its PING reply
// once made Start return a Server whose own process had exited, and the
// test then paused, killed and restarted another process's server, or
// talked to it. launch tries another port on this error.
func TestStartOnTakenPort(t *testing.T) {
	other := Start(t)
	s := &Server{t: t, bin: Binary(t), port: other.Port(), args: []string{
		"--port", other.args[1], "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", t.TempDir(),
	}}
	err := s.start()
	if err == nil {
		pid := s.Pid()
		s.Kill()
		t.Fatalf("start on the port of a running server (pid %d) succeeded, with pid %d", other.Pid(), pid)
	}
	if !strings.Contains(err.Error(), "Address already in use") {
		t.Errorf("start on a taken port: %v; want an error saying the address is in use, which launch retries", err)
	}
	if ping(other.Addr()) != nil {
		t.Error("the other server stopped answering")
	}
}
