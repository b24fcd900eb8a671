module github.com/ratelab/ratelab

go 1.26.0

require (
	github.com/sethvargo/go-limiter v0.7.1
	github.com/throttled/throttled/v2 v2.15.0
	golang.org/x/time v0.16.0
)

require github.com/hashicorp/golang-lru v0.5.4 // indirect
