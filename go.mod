module github.com/keyrate/keyrate

go 1.26

require (
	github.com/puzpuzpuz/xsync/v3 v3.5.1
	go.uber.org/goleak v1.3.0
)
