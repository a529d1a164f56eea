module github.com/keyrate/keyrate/bench

go 1.26.0

require (
	github.com/didip/tollbooth/v7 v7.0.2
	github.com/go-chi/httprate v0.16.1
	github.com/keyrate/keyrate v0.0.0-00010101000000-000000000000
	github.com/keyrate/keyrate/keyrateotel v0.0.0-00010101000000-000000000000
	github.com/keyrate/keyrate/keyrateprom v0.0.0-00010101000000-000000000000
	github.com/prometheus/client_golang v1.25.0
	github.com/puzpuzpuz/xsync/v3 v3.5.1
	github.com/sethvargo/go-limiter v0.7.1
	go.opentelemetry.io/otel/sdk/metric v1.47.0
	golang.org/x/time v0.16.0
)

require (
	github.com/beorn7/perks v1.0.1 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/go-logr/logr v1.4.4 // indirect
	github.com/go-logr/stdr v1.2.2 // indirect
	github.com/go-pkgz/expirable-cache/v3 v3.0.0 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/klauspost/cpuid/v2 v2.2.10 // indirect
	github.com/munnerz/goautoneg v0.0.0-20191010083416-a7dc8b61c822 // indirect
	github.com/prometheus/client_model v0.6.3 // indirect
	github.com/prometheus/common v0.72.0 // indirect
	github.com/prometheus/procfs v0.22.0 // indirect
	github.com/zeebo/xxh3 v1.0.2 // indirect
	go.opentelemetry.io/auto/sdk v1.2.1 // indirect
	go.opentelemetry.io/otel v1.47.0 // indirect
	go.opentelemetry.io/otel/log v1.47.0 // indirect
	go.opentelemetry.io/otel/metric v1.47.0 // indirect
	go.opentelemetry.io/otel/sdk v1.47.0 // indirect
	go.opentelemetry.io/otel/trace v1.47.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)

// keyrate's modules are developed together (see go.work at the root); the
// replace keeps this module building and tidy offline against this checkout.
// Users' builds ignore it: a release tags the root module first and then
// requires that tag here (see docs/guides/development.md).
replace github.com/keyrate/keyrate => ..

replace github.com/keyrate/keyrate/keyrateotel => ../keyrateotel

replace github.com/keyrate/keyrate/keyrateprom => ../keyrateprom
