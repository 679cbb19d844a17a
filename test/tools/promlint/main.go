// Command promlint lints Prometheus text exposition read from stdin with client_golang's
// promlint rules (the ones `promtool check metrics` applies): one problem per line on
// stdout, exit status 1 when there is any, 2 when the input cannot be parsed.
package main

import (
	"fmt"
	"os"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
)

func main() {
	problems, err := promlint.New(os.Stdin).Lint()
	if err != nil {
		fmt.Fprintln(os.Stderr, "promlint:", err)
		os.Exit(2)
	}
	for _, p := range problems {
		fmt.Printf("%s: %s\n", p.Metric, p.Text)
	}
	if len(problems) > 0 {
		os.Exit(1)
	}
}
