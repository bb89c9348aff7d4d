// Command sizetests prints what .ci/run needs to run the size tests
// without -race: the -run pattern on the first line, then the packages'
// directories, one per line. It reads the module in the current
// directory.
package main

import (
	"fmt"
	"os"
	"regexp"
	"strings"

	"github.com/aml-go/aml/internal/sizetest"
)

func main() {
	tests, err := sizetest.Marked(".")
	if err != nil {
		fmt.Fprintln(os.Stderr, "sizetests:", err)
		os.Exit(1)
	}
	if len(tests) == 0 {
		fmt.Fprintln(os.Stderr, "sizetests: no test calls sizetest.SkipUnderRace")
		os.Exit(1)
	}
	var names, dirs []string
	seen := map[string]bool{}
	for _, t := range tests {
		names = append(names, regexp.QuoteMeta(t.Name))
		if !seen[t.Dir] {
			seen[t.Dir] = true
			dirs = append(dirs, t.Dir)
		}
	}
	fmt.Printf("^(%s)$\n", strings.Join(names, "|"))
	for _, d := range dirs {
		fmt.Println(d)
	}
}
