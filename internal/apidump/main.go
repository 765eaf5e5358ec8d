// Command apidump writes the exported API of the packages of a Go module,
// one declaration a line, sorted, in the spirit of the Go distribution's
// api/*.txt files. The project keeps the output for each of its modules
// under api/ and CI compares it with the code (scripts/api-check.sh), so
// that a change to the API is always a deliberate one: whoever changes an
// exported name also changes the file, and CHANGELOG.md says what it
// means for users.
//
// Usage:
//
//	go run ./internal/apidump [-dir MODULE_DIR]
//
// It reads the source only (no build, no type checking): a declaration
// is listed as written, parameter names dropped. Packages under internal/,
// testdata/, main packages, test files and nested modules are skipped.
// Methods promoted from an embedded type are not repeated: the embedding
// field is listed, and the embedded type's methods under its own package.
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/printer"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

func main() {
	dir := flag.String("dir", ".", "the module's directory (where its go.mod is)")
	flag.Parse()
	lines, err := dump(*dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "apidump:", err)
		os.Exit(1)
	}
	w := bufio.NewWriter(os.Stdout)
	for _, l := range lines {
		fmt.Fprintln(w, l)
	}
	if err := w.Flush(); err != nil {
		fmt.Fprintln(os.Stderr, "apidump:", err)
		os.Exit(1)
	}
}

// dump lists the exported API of every package of the module in dir.
func dump(dir string) ([]string, error) {
	modPath, err := modulePath(filepath.Join(dir, "go.mod"))
	if err != nil {
		return nil, err
	}
	var lines []string
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(dir, path)
		base := d.Name()
		if rel != "." {
			if base == "internal" || base == "testdata" || strings.HasPrefix(base, ".") || strings.HasPrefix(base, "_") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
				return filepath.SkipDir // a module of its own
			}
		}
		importPath := modPath
		if rel != "." {
			importPath += "/" + filepath.ToSlash(rel)
		}
		pkgLines, err := dumpPackage(path, importPath)
		if err != nil {
			return err
		}
		lines = append(lines, pkgLines...)
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.Sort(lines)
	return slices.Compact(lines), nil
}

// modulePath reads the module line of a go.mod file.
func modulePath(gomod string) (string, error) {
	data, err := os.ReadFile(gomod)
	if err != nil {
		return "", err
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`), nil
		}
	}
	return "", fmt.Errorf("%s: no module line", gomod)
}

// dumpPackage lists the exported declarations of the package in dir, or
// nothing for a directory without one, a main package or one whose
// files all carry build constraints other than the default ones.
func dumpPackage(dir, importPath string) ([]string, error) {
	fset := token.NewFileSet()
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var files []*ast.File
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		if f.Name.Name == "main" || f.Name.Name == "documentation" {
			return nil, nil
		}
		files = append(files, f)
	}
	d := dumper{fset: fset, prefix: "pkg " + importPath + ", "}
	for _, f := range files {
		for _, decl := range f.Decls {
			d.decl(decl)
		}
	}
	return d.lines, nil
}

type dumper struct {
	fset   *token.FileSet
	prefix string
	lines  []string
}

func (d *dumper) add(format string, args ...any) {
	d.lines = append(d.lines, d.prefix+fmt.Sprintf(format, args...))
}

func (d *dumper) decl(decl ast.Decl) {
	switch decl := decl.(type) {
	case *ast.FuncDecl:
		if !decl.Name.IsExported() {
			return
		}
		if decl.Recv == nil {
			d.add("func %s%s", decl.Name.Name, d.signature(decl.Type))
			return
		}
		recv := decl.Recv.List[0].Type
		if !ast.IsExported(receiverName(recv)) {
			return
		}
		d.add("method (%s) %s%s", d.expr(recv), decl.Name.Name, d.signature(decl.Type))
	case *ast.GenDecl:
		for _, spec := range decl.Specs {
			switch spec := spec.(type) {
			case *ast.TypeSpec:
				d.typeSpec(spec)
			case *ast.ValueSpec:
				d.valueSpec(decl.Tok, spec)
			}
		}
	}
}

func receiverName(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.StarExpr:
		return receiverName(e.X)
	case *ast.IndexExpr:
		return receiverName(e.X)
	case *ast.IndexListExpr:
		return receiverName(e.X)
	case *ast.Ident:
		return e.Name
	}
	return ""
}

func (d *dumper) typeSpec(s *ast.TypeSpec) {
	if !s.Name.IsExported() {
		return
	}
	name := s.Name.Name
	if s.TypeParams != nil {
		name += "[" + d.fields(s.TypeParams, true) + "]"
	}
	if s.Assign.IsValid() {
		d.add("type %s = %s", name, d.expr(s.Type))
		return
	}
	switch t := s.Type.(type) {
	case *ast.StructType:
		d.add("type %s struct", name)
		for _, f := range t.Fields.List {
			if len(f.Names) == 0 { // embedded
				if ast.IsExported(receiverName(f.Type)) {
					d.add("type %s struct, embedded %s", name, d.expr(f.Type))
				}
				continue
			}
			for _, n := range f.Names {
				if n.IsExported() {
					d.add("type %s struct, %s %s", name, n.Name, d.expr(f.Type))
				}
			}
		}
	case *ast.InterfaceType:
		d.add("type %s interface", name)
		for _, m := range t.Methods.List {
			if len(m.Names) == 0 {
				d.add("type %s interface, embedded %s", name, d.expr(m.Type))
				continue
			}
			for _, n := range m.Names {
				if !n.IsExported() {
					d.add("type %s interface, unexported methods", name)
					continue
				}
				if ft, ok := m.Type.(*ast.FuncType); ok {
					d.add("type %s interface, %s%s", name, n.Name, d.signature(ft))
				}
			}
		}
	default:
		d.add("type %s %s", name, d.expr(s.Type))
	}
}

func (d *dumper) valueSpec(tok token.Token, s *ast.ValueSpec) {
	for i, n := range s.Names {
		if !n.IsExported() {
			continue
		}
		switch {
		case s.Type != nil && tok == token.CONST && i < len(s.Values):
			d.add("const %s %s = %s", n.Name, d.expr(s.Type), d.expr(s.Values[i]))
		case s.Type != nil:
			d.add("%s %s %s", tok, n.Name, d.expr(s.Type))
		case tok == token.CONST && i < len(s.Values):
			d.add("const %s = %s", n.Name, d.expr(s.Values[i]))
		case i < len(s.Values) && isName(s.Values[i]):
			d.add("%s %s = %s", tok, n.Name, d.expr(s.Values[i]))
		default:
			d.add("%s %s", tok, n.Name)
		}
	}
}

// isName reports whether e is an identifier or a qualified one (an alias
// of another package's value is part of the API; an expression that
// builds a value is not).
func isName(e ast.Expr) bool {
	switch e := e.(type) {
	case *ast.Ident:
		return true
	case *ast.SelectorExpr:
		return isName(e.X)
	}
	return false
}

// signature prints a function type without its parameter names.
func (d *dumper) signature(t *ast.FuncType) string {
	var b strings.Builder
	if t.TypeParams != nil {
		b.WriteString("[" + d.fields(t.TypeParams, true) + "]")
	}
	b.WriteString("(" + d.fields(t.Params, false) + ")")
	if t.Results != nil && len(t.Results.List) > 0 {
		res := d.fields(t.Results, false)
		if len(t.Results.List) == 1 && len(t.Results.List[0].Names) <= 1 {
			b.WriteString(" " + res)
		} else {
			b.WriteString(" (" + res + ")")
		}
	}
	return b.String()
}

// fields prints a field list's types, one per name; with names (type
// parameters) it keeps them.
func (d *dumper) fields(fl *ast.FieldList, names bool) string {
	if fl == nil {
		return ""
	}
	var parts []string
	for _, f := range fl.List {
		typ := d.expr(f.Type)
		if names {
			for _, n := range f.Names {
				parts = append(parts, n.Name+" "+typ)
			}
			continue
		}
		count := max(len(f.Names), 1)
		for range count {
			parts = append(parts, typ)
		}
	}
	return strings.Join(parts, ", ")
}

// expr prints an expression on one line.
func (d *dumper) expr(e ast.Expr) string {
	if ft, ok := e.(*ast.FuncType); ok {
		return "func" + d.signature(ft)
	}
	var buf bytes.Buffer
	if err := printer.Fprint(&buf, d.fset, e); err != nil {
		return fmt.Sprintf("<%v>", err)
	}
	return strings.Join(strings.Fields(buf.String()), " ")
}
