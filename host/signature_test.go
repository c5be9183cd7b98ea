package host

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/tetratelabs/wazero/api"
)

// TestHostcallsMatchSDK checks every import of proxy-wasm-go-sdk v0.24.0
// (its TinyGo hostcall declarations) against the host's functions: same
// name, same wasm signature. TinyGo's int and pointers are i32.
func TestHostcallsMatchSDK(t *testing.T) {
	out, err := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "list", "-m", "-f", "{{.Dir}}",
		"github.com/tetratelabs/proxy-wasm-go-sdk").Output()
	if err != nil {
		t.Fatalf("locate the SDK: %v", err)
	}
	file := filepath.Join(strings.TrimSpace(string(out)), "proxywasm", "internal", "abi_hostcalls.go")
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	have := map[string][]api.ValueType{}
	for _, h := range hostcallsFor(abi021) {
		have[h.name] = h.paramTypes()
	}
	n := 0
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || fd.Doc == nil {
			continue
		}
		name := ""
		for _, c := range fd.Doc.List {
			if rest, ok := strings.CutPrefix(c.Text, "//export "); ok {
				name = strings.TrimSpace(rest)
			}
		}
		if name == "" {
			continue
		}
		n++
		var want []api.ValueType
		for _, p := range fd.Type.Params.List {
			vt := api.ValueTypeI32
			if id, ok := p.Type.(*ast.Ident); ok && (id.Name == "int64" || id.Name == "uint64") {
				vt = api.ValueTypeI64
			}
			for range max(len(p.Names), 1) {
				want = append(want, vt)
			}
		}
		got, ok := have[name]
		if !ok {
			t.Errorf("the SDK imports %s, the host lacks it", name)
			continue
		}
		if sig(got) != sig(want) {
			t.Errorf("%s: host takes %s, the SDK passes %s", name, sig(got), sig(want))
		}
	}
	if n < 25 {
		t.Fatalf("found only %d SDK hostcalls in %s", n, file)
	}
}
