// promql-check parses PromQL expressions with Prometheus's own parser, so a dashboard's and an
// alert rule's queries are checked by the grammar Prometheus runs, not by a guess at it.
//
// Input (stdin): a JSON array of expressions. Output: one line per expression that does not
// parse, "<index>\t<error>", and exit code 1 if any; for each that parses, the metric names
// its vector selectors name, "<index>\tmetric\t<name>".
package main

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
)

func main() {
	var exprs []string
	if err := json.NewDecoder(os.Stdin).Decode(&exprs); err != nil {
		fmt.Fprintln(os.Stderr, "reading a JSON array of expressions:", err)
		os.Exit(2)
	}
	promql := parser.NewParser(parser.Options{})
	failed := false
	for i, text := range exprs {
		expr, err := promql.ParseExpr(text)
		if err != nil {
			fmt.Printf("%d\t%s\n", i, err)
			failed = true
			continue
		}
		parser.Inspect(expr, func(node parser.Node, _ []parser.Node) error {
			if selector, ok := node.(*parser.VectorSelector); ok {
				for _, matcher := range selector.LabelMatchers {
					if matcher.Name == labels.MetricName && matcher.Type == labels.MatchEqual {
						fmt.Printf("%d\tmetric\t%s\n", i, matcher.Value)
					}
				}
			}
			return nil
		})
	}
	if failed {
		os.Exit(1)
	}
}
