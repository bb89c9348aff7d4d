// Command agentmatrix prints the agent table a test run proved: given the
// output of "go test -v ./..." (a file, or standard input), each cell is
// marked with its test's result. It exits 1 when a cell's test failed or
// did not run, 2 on a usage or read error. With -markdown it prints the
// table as docs/agents.md holds it.
//
//	go run ./internal/agentmatrix/cmd/agentmatrix test.log
//	go run ./internal/agentmatrix/cmd/agentmatrix -markdown
package main

import (
	"fmt"
	"io"
	"os"

	"github.com/aml-go/aml/internal/agentmatrix"
)

func main() {
	var in io.Reader = os.Stdin
	switch len(os.Args) {
	case 1:
	case 2:
		if os.Args[1] == "-markdown" {
			fmt.Print(agentmatrix.Markdown())
			return
		}
		f, err := os.Open(os.Args[1])
		if err != nil {
			fmt.Fprintln(os.Stderr, "agentmatrix:", err)
			os.Exit(2)
		}
		defer f.Close()
		in = f
	default:
		fmt.Fprintln(os.Stderr, "usage: agentmatrix [go-test-v.log | -markdown]")
		os.Exit(2)
	}
	table, problems, err := agentmatrix.Check(in)
	if err != nil {
		fmt.Fprintln(os.Stderr, "agentmatrix:", err)
		os.Exit(2)
	}
	fmt.Print(table)
	for _, p := range problems {
		fmt.Println("not proven:", p)
	}
	if len(problems) > 0 {
		os.Exit(1)
	}
}
