// Package eventdoc writes docs/events.md from the event catalogue (internal/runtime/obs/catalogue.go): the kinds,
// who writes each, and every field with its JSON type and meaning, read from the Go types and their comments.
package eventdoc

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"strings"

	"github.com/imslab/quasipool/internal/runtime/obs"
)

// CatalogueFile is the catalogue's source file, in the obs package's directory.
const CatalogueFile = "catalogue.go"

// typeDoc is what the catalogue's source says about one type.
type typeDoc struct {
	doc    string            // the doc comment
	under  string            // for `type Fault FaultFields`: FaultFields
	fields map[string]string // Go field name → its comment
	kind   bool              // has a Kind method
}

// parse reads the comments of the catalogue's types.
func parse(obsDir string) (map[string]*typeDoc, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, filepath.Join(obsDir, CatalogueFile), nil, parser.ParseComments)
	if err != nil {
		return nil, fmt.Errorf("eventdoc: %w", err)
	}
	docs := map[string]*typeDoc{}
	get := func(name string) *typeDoc {
		if docs[name] == nil {
			docs[name] = &typeDoc{fields: map[string]string{}}
		}
		return docs[name]
	}
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.GenDecl:
			for _, s := range d.Specs {
				ts, ok := s.(*ast.TypeSpec)
				if !ok {
					continue
				}
				td := get(ts.Name.Name)
				td.doc = d.Doc.Text()
				if ts.Doc != nil {
					td.doc = ts.Doc.Text()
				}
				switch t := ts.Type.(type) {
				case *ast.Ident:
					td.under = t.Name
				case *ast.StructType:
					for _, fl := range t.Fields.List {
						for _, n := range fl.Names {
							td.fields[n.Name] = strings.TrimSpace(fl.Comment.Text())
						}
					}
				}
			}
		case *ast.FuncDecl:
			if d.Recv != nil && d.Name.Name == "Kind" {
				if id, ok := d.Recv.List[0].Type.(*ast.Ident); ok {
					get(id.Name).kind = true
				}
			}
		}
	}
	return docs, nil
}

// Check reports what the catalogue lacks: a type with a Kind method that is not in obs.Kinds, a kind without a
// doc comment or a "Written by:" paragraph, a field without a comment.
func Check(obsDir string) error {
	docs, err := parse(obsDir)
	if err != nil {
		return err
	}
	listed := map[string]bool{}
	var problems []string
	for _, k := range obs.Kinds() {
		listed[k.Type.Name()] = true
		td := docs[k.Type.Name()]
		if td == nil || td.doc == "" {
			problems = append(problems, k.Type.Name()+": no doc comment")
			continue
		}
		if _, w := split(td.doc); w == "" {
			problems = append(problems, k.Type.Name()+`: no "Written by:" paragraph in its doc comment`)
		}
		walkFields(k.Type, docs, func(owner, field string, comment string) {
			if comment == "" {
				problems = append(problems, owner+"."+field+": no comment")
			}
		})
	}
	for name, td := range docs {
		if td.kind && !listed[name] {
			problems = append(problems, name+": has a Kind method but is not in the catalogue's list (kinds)")
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("eventdoc: %s", strings.Join(problems, "; "))
	}
	return nil
}

// walkFields calls fn for every field of t and of the structs in it (SiteLink in Links), with its comment.
func walkFields(t reflect.Type, docs map[string]*typeDoc, fn func(owner, field, comment string)) {
	td := fieldDocs(t.Name(), docs)
	for i := range t.NumField() {
		f := t.Field(i)
		fn(t.Name(), f.Name, td[f.Name])
		if e := elem(f.Type); e.Kind() == reflect.Struct {
			walkFields(e, docs, fn)
		}
	}
}

func fieldDocs(name string, docs map[string]*typeDoc) map[string]string {
	td := docs[name]
	if td == nil {
		return nil
	}
	if td.under != "" {
		return fieldDocs(td.under, docs)
	}
	return td.fields
}

func elem(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice && t != reflect.TypeFor[json.RawMessage]() {
		t = t.Elem()
	}
	return t
}

// split separates a doc comment into its meaning and the writer ("Written by: …" without the prefix).
func split(doc string) (meaning, writer string) {
	var keep []string
	for _, p := range strings.Split(strings.TrimSpace(doc), "\n\n") {
		if w, ok := strings.CutPrefix(p, "Written by:"); ok {
			writer = strings.TrimSuffix(strings.Join(strings.Fields(w), " "), ".")
			continue
		}
		keep = append(keep, strings.Join(strings.Fields(p), " "))
	}
	return strings.Join(keep, "\n\n"), writer
}

// jsonType names t as JSON has it.
func jsonType(t reflect.Type) string {
	if t == reflect.TypeFor[json.RawMessage]() {
		return "object"
	}
	switch t.Kind() {
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint8,
		reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "integer"
	case reflect.Float32, reflect.Float64:
		return "number"
	case reflect.Pointer:
		return jsonType(t.Elem())
	case reflect.Slice:
		return "array of " + jsonType(t.Elem())
	case reflect.Struct:
		return "object (" + t.Name() + ")"
	}
	return t.String()
}

// Markdown renders docs/events.md from the catalogue in obsDir (the directory of internal/runtime/obs).
func Markdown(obsDir string) ([]byte, error) {
	if err := Check(obsDir); err != nil {
		return nil, err
	}
	docs, err := parse(obsDir)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.WriteString(`# Events

<!-- Generated from internal/runtime/obs/catalogue.go by ` + "`go generate ./internal/runtime/obs`" + `; do not edit. A unit spec
(internal/runtime/obs/eventdoc) fails when this file is stale. -->

Every node, the lab and the phones record **events**: one JSON line per finished transaction or state change, in
` + "`<run-dir>/events/<node>.jsonl`" + ` (the lab's own in ` + "`events/lab.jsonl`" + `, the phones' in ` + "`events/ue.jsonl`" + `); the report
merges them into ` + "`<run-dir>/events.jsonl`" + ` in time order. Reports and checks read events, never log text.

Each kind is one Go type of the catalogue (` + "`internal/runtime/obs/catalogue.go`" + `): a node writes
` + "`rec.Emit(obs.SIPTx{…})`" + `, and the report reads a line back with ` + "`obs.DecodeEvent`" + ` into the same type, so writer and
reader cannot disagree on a field's name or type. A line whose kind is not in the catalogue, or that does not
decode (torn by a kill, a field of the wrong type), is an error the report lists with its file and line and counts
in ` + "`summary.json`" + ` (` + "`events.errors`" + `); it is never dropped silently.

Every line has the envelope:

| key | type | meaning |
|---|---|---|
| ` + "`ts`" + ` | string | when, RFC 3339 with nanoseconds, UTC |
| ` + "`t_ns`" + ` | integer | the same instant in Unix nanoseconds: the time base of every file of a run |
| ` + "`node`" + ` | string | who wrote it: the node's name, ` + "`lab`" + ` for the lab, ` + "`ue`" + ` for the phones |
| ` + "`kind`" + ` | string | the kind below, which says what the other keys are |

The kind's fields are next to the envelope keys, all keys in sorted order. A field marked "when set" is left out
of the line when it is zero or empty (a kind several writers share has each writer's own fields so); the others
are always there.

| kind | written by | meaning |
|---|---|---|
`)
	ks := obs.Kinds()
	for _, k := range ks {
		meaning, writer := split(docs[k.Type.Name()].doc)
		first, _, _ := strings.Cut(meaning, ". ")
		first = strings.TrimSuffix(strings.SplitN(first, "\n", 2)[0], ".")
		legacy := ""
		if k.Legacy {
			legacy = " (legacy)"
		}
		fmt.Fprintf(&b, "| [`%s`](#%s)%s | %s | %s |\n", k.Kind, k.Kind, legacy, writer, stripName(first, k.Type.Name()))
	}
	for _, k := range ks {
		meaning, writer := split(docs[k.Type.Name()].doc)
		fmt.Fprintf(&b, "\n## `%s`\n\n", k.Kind)
		if k.Legacy {
			b.WriteString("**Legacy**: no node writes it any more; runs recorded before still have it and the report reads it.\n\n")
		}
		fmt.Fprintf(&b, "Go type `obs.%s`. Written by: %s.\n\n%s\n", k.Type.Name(), writer, meaning)
		if k.Type.NumField() == 0 {
			b.WriteString("\nNo fields besides the envelope.\n")
			continue
		}
		b.WriteString("\n| field | type | present | meaning |\n|---|---|---|---|\n")
		fieldRows(&b, k.Type, docs, "")
	}
	return b.Bytes(), nil
}

func fieldRows(b *bytes.Buffer, t reflect.Type, docs map[string]*typeDoc, prefix string) {
	fd := fieldDocs(t.Name(), docs)
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		present := "always"
		if strings.Contains(opts, "omitempty") {
			present = "when set"
		}
		fmt.Fprintf(b, "| `%s%s` | %s | %s | %s |\n", prefix, name, jsonType(f.Type), present,
			strings.ReplaceAll(fd[f.Name], "|", `\|`))
		if e := elem(f.Type); e.Kind() == reflect.Struct {
			fieldRows(b, e, docs, prefix+name+"[].")
		}
	}
}

// stripName turns "SIPTx is one request …" into "One request …".
func stripName(s, name string) string {
	for _, p := range []string{name + " is ", name + " are "} {
		if r, ok := strings.CutPrefix(s, p); ok && r != "" {
			return strings.ToUpper(r[:1]) + r[1:]
		}
	}
	return s
}
