module github.com/keyrate/keyrate/grpclimit

go 1.26.0

require (
	github.com/keyrate/keyrate v0.0.0-00010101000000-000000000000
	github.com/stretchr/testify v1.12.1
	google.golang.org/genproto/googleapis/rpc v0.0.0-20261104224025-d1e00e9f33ab
	google.golang.org/grpc v1.85.0
	google.golang.org/protobuf v1.36.12
)

require (
	github.com/puzpuzpuz/xsync/v3 v3.5.1 // indirect
	go.uber.org/goleak v1.3.0 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/net v0.60.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
	golang.org/x/text v0.42.0 // indirect
)

// keyrate's modules are developed together (see go.work at the root); the
// replace keeps this module building and tidy offline against this checkout.
// Users' builds ignore it: a release tags the root module first and then
// requires that tag here (see docs/guides/development.md).
replace github.com/keyrate/keyrate => ..
