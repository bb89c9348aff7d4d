// Command vulngate reads govulncheck -format json on stdin, prints what it
// found and exits 1 when a finding fails the build (see package
// vulngate): an imported package of a required module with a fix.
package main

import (
	"fmt"
	"os"

	"github.com/aml-go/aml/internal/vulngate"
)

func main() {
	fs, err := vulngate.Read(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "vulngate:", err)
		os.Exit(2)
	}
	failed := 0
	for _, f := range fs {
		mark := "note"
		if f.Fails() {
			mark, failed = "FAIL", failed+1
		}
		fmt.Printf("%s  %s\n", mark, f)
	}
	fmt.Printf("vulnerabilities: %d found, %d failing the build\n", len(fs), failed)
	if failed > 0 {
		os.Exit(1)
	}
}
