// The cluster tier's test image: one static binary, no dependencies (see main.go).
module browserplane.dev/test/cluster/image

go 1.26.0
