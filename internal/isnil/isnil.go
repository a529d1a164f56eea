// Package isnil tells a nil interface value from one that holds a typed
// nil, such as (*redis.Client)(nil) passed as a redis.UniversalClient: the
// interface is then not == nil, yet every method call on it panics. The
// constructors that take an interface (redisbucket.New's client,
// httplimit.New's limiter) check it once, at construction, so that a nil
// argument is an error there instead of a panic on every call.
package isnil

import "reflect"

// Is reports whether v is nil or holds a nil pointer, slice, map, func,
// channel, interface or unsafe pointer. It uses reflection: call it at
// construction, not on a request path.
func Is(v any) bool {
	if v == nil {
		return true
	}
	switch rv := reflect.ValueOf(v); rv.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Map, reflect.Func, reflect.Chan, reflect.Interface, reflect.UnsafePointer:
		return rv.IsNil()
	}
	return false
}
