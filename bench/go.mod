module github.com/keyrate/keyrate/bench

go 1.26.0

require (
	github.com/keyrate/keyrate v0.0.0-00010101000000-000000000000
	github.com/puzpuzpuz/xsync/v3 v3.5.1
	golang.org/x/time v0.16.0
)

// keyrate's modules are developed together (see go.work at the root); the
// replace keeps this module building and tidy offline against this checkout.
// Users' builds ignore it: a release tags the root module first and then
// requires that tag here (see the README's Modules section).
replace github.com/keyrate/keyrate => ..
