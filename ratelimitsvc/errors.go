package ratelimitsvc

import (
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

var (
	// ErrInvalidConfig reports a configuration file that cannot be read
	// as envoyproxy/ratelimit's YAML (with keyrate's fields): a syntax
	// error, an unknown key, a value of the wrong kind or out of range, a
	// duplicate domain or descriptor, or a rule the store refuses (at
	// Reload). Every such error is a *ConfigError naming the file, the
	// line and the value.
	ErrInvalidConfig = errors.New("ratelimitsvc: invalid config")

	// ErrInvalidRequest reports a RateLimitRequest the service refuses
	// before deciding anything: an empty domain, no descriptors, or a
	// request beyond one of the service's bounds (descriptors, entries, a
	// descriptor's key length). The error names the value and the bound.
	// The gRPC status is codes.InvalidArgument.
	ErrInvalidRequest = errors.New("ratelimitsvc: invalid request")

	// ErrTooManyOverrides reports a request whose limit override (a
	// descriptor's "limit" field) would add a policy beyond
	// MaxOverrides distinct overrides. The gRPC status is
	// codes.ResourceExhausted.
	ErrTooManyOverrides = errors.New("ratelimitsvc: too many limit overrides")
)

// ConfigError is an error in a configuration file, at a line and column
// (both from 1; 0 when the error is about the file as a whole). It wraps
// ErrInvalidConfig, and the error that caused it, if any (such as
// keyrate.ErrInvalidLimit for a limit keyrate cannot enforce).
type ConfigError struct {
	// File is the name of the file, as given to ParseConfig or
	// LoadConfig.
	File string
	// Line and Column locate the offending value.
	Line, Column int
	// Msg says what is wrong, naming the value and, for a value out of
	// range, the bound.
	Msg string
	// Err is the underlying error, or nil.
	Err error
}

// Error returns "file:line:column: message".
func (e *ConfigError) Error() string {
	switch {
	case e.Line == 0:
		return fmt.Sprintf("%s: %s", e.File, e.Msg)
	case e.Column == 0:
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	}
	return fmt.Sprintf("%s:%d:%d: %s", e.File, e.Line, e.Column, e.Msg)
}

// Unwrap returns ErrInvalidConfig and the underlying error, if any.
func (e *ConfigError) Unwrap() []error {
	if e.Err != nil {
		return []error{ErrInvalidConfig, e.Err}
	}
	return []error{ErrInvalidConfig}
}

// rpcError is an error the Service returns to gRPC with a status code,
// that errors.Is still sees through: gRPC takes its code from
// GRPCStatus, and an embedder calling ShouldRateLimit in process can tell
// ErrInvalidRequest from ErrTooManyOverrides.
type rpcError struct {
	code codes.Code
	err  error
}

func (e *rpcError) Error() string              { return e.err.Error() }
func (e *rpcError) Unwrap() error              { return e.err }
func (e *rpcError) GRPCStatus() *status.Status { return status.New(e.code, e.err.Error()) }

// rpcErrorf returns an *rpcError of code, formatting as fmt.Errorf.
func rpcErrorf(code codes.Code, format string, args ...any) error {
	return &rpcError{code: code, err: fmt.Errorf(format, args...)}
}
