// Command eventsdoc writes docs/events.md from the event catalogue: go generate ./internal/runtime/obs.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/imslab/quasipool/internal/runtime/obs/eventdoc"
)

func main() {
	src := flag.String("src", ".", "the directory of internal/runtime/obs (the catalogue's package)")
	out := flag.String("o", "docs/events.md", "the file to write")
	flag.Parse()
	b, err := eventdoc.Markdown(*src)
	if err == nil {
		err = os.WriteFile(*out, b, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "eventsdoc:", err)
		os.Exit(1)
	}
}
