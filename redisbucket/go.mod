module github.com/keyrate/keyrate/redisbucket

go 1.26.0

require (
	github.com/keyrate/keyrate v0.0.0-00010101000000-000000000000
	github.com/redis/go-redis/v9 v9.23.0
	go.uber.org/goleak v1.3.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/puzpuzpuz/xsync/v3 v3.5.1 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
)

// keyrate's modules are developed together (see go.work at the root); the
// replace keeps this module building and tidy offline against this checkout.
// Users' builds ignore it: a release tags the root module first and then
// requires that tag here (see docs/guides/development.md).
replace github.com/keyrate/keyrate => ..
