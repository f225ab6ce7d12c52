// Package cx is the 3GPP Cx interface (TS 29.228 procedures, TS 29.229 protocol) for the testbed: its Diameter
// dictionary, typed requests and answers, the client the CSCFs use and the server glue the HSS uses.
package cx

import (
	"bytes"
	_ "embed"
	"fmt"
	"sync"

	"github.com/fiorix/go-diameter/v4/diam/dict"
)

//go:embed dict/base.xml
var baseXML []byte

//go:embed dict/cx.xml
var cxXML []byte

var (
	parserOnce sync.Once
	parser     *dict.Parser
	parserErr  error
)

// Dict returns the dictionary shared by every Cx peer of the testbed: the Diameter base protocol plus Cx and
// nothing else, so a capabilities exchange advertises only Cx. It is loaded once and must not be modified.
func Dict() *dict.Parser {
	parserOnce.Do(func() {
		p, err := dict.NewParser()
		if err != nil {
			parserErr = fmt.Errorf("cx: new dictionary parser: %w", err)
			return
		}
		if err := p.Load(bytes.NewReader(baseXML)); err != nil {
			parserErr = fmt.Errorf("cx: load base dictionary: %w", err)
			return
		}
		if err := p.Load(bytes.NewReader(cxXML)); err != nil {
			parserErr = fmt.Errorf("cx: load Cx dictionary: %w", err)
			return
		}
		parser = p
	})
	if parserErr != nil {
		// The dictionaries are embedded and covered by tests: failing here is a build defect, not bad input.
		panic(parserErr)
	}
	return parser
}

// DictionaryXML returns the embedded Cx dictionary, for tools that want to show or export it.
func DictionaryXML() []byte { return bytes.Clone(cxXML) }
