module browserplane.dev/test/tools/promlint

go 1.24

require github.com/prometheus/client_golang v1.22.0

require (
	github.com/munnerz/goautoneg v0.0.0-20191010083416-a7dc8b61c822 // indirect
	github.com/prometheus/client_model v0.6.1 // indirect
	github.com/prometheus/common v0.62.0 // indirect
	google.golang.org/protobuf v1.36.5 // indirect
)
