package httplimit

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/atomicbucket"
)

// TestByIPTypedNilLocalAddr: a request whose context holds a nil address
// of a net.Addr type under http.LocalAddrContextKey (a harness or an
// earlier middleware wrote it; *net.UnixAddr's Network method
// dereferences its receiver) is keyed by its RemoteAddr, as one with no
// local address: ByIP does not panic.
func TestByIPTypedNilLocalAddr(t *testing.T) {
	for _, local := range []net.Addr{(*net.UnixAddr)(nil), (*net.TCPAddr)(nil), (*net.IPAddr)(nil)} {
		store, err := atomicbucket.New(keyrate.PerMinute(1))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { store.Close() })
		mw, err := New(store)
		if err != nil {
			t.Fatal(err)
		}
		called := 0
		h := mw(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { called++ }))
		for i, want := range []int{200, 429} {
			req := httptest.NewRequest("GET", "/", nil)
			req.RemoteAddr = "192.0.2.1:1234"
			req = req.WithContext(context.WithValue(req.Context(), http.LocalAddrContextKey, local))
			rec := httptest.NewRecorder()
			func() {
				defer func() {
					if p := recover(); p != nil {
						t.Fatalf("%T: request %d panicked: %v", local, i, p)
					}
				}()
				h.ServeHTTP(rec, req)
			}()
			if rec.Code != want {
				t.Errorf("%T: request %d: status %d, want %d", local, i, rec.Code, want)
			}
		}
		if called != 1 {
			t.Errorf("%T: handler called %d times, want 1", local, called)
		}
	}
}
