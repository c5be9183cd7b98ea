package main

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// readmeCommands returns the first command of each ```sh block of README.md.
func readmeCommands(t *testing.T) []string {
	f, err := os.Open("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var cmds []string
	in, first := false, false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "```sh":
			in, first = true, true
		case line == "```":
			in = false
		case in && first && line != "":
			cmds, first = append(cmds, line), false
		}
	}
	return cmds
}

// TestReadmeFirstCommand runs the README's first command exactly as written
// and checks it shows the failover it promises.
func TestReadmeFirstCommand(t *testing.T) {
	cmds := readmeCommands(t)
	if len(cmds) < 2 || cmds[1] != "make test" {
		t.Fatalf("README commands %q: want the main job first and `make test` second", cmds)
	}
	if !strings.HasPrefix(cmds[0], "go run ./cmd/loctree ") {
		t.Fatalf("first README command %q does not run loctree", cmds[0])
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", cmds[0])
	cmd.Dir = "../.."
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", cmds[0], err, out)
	}
	for _, want := range []string{"matched 2 of 3 scopes: 1 candidate", "127.0.2.5:9080", "1000 (100.0%)"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// TestReadmeGoSnippet compiles and runs the README's ```go block as the
// program it is, inside this module (through a build overlay, so nothing
// is written into the checkout), and checks what it prints.
func TestReadmeGoSnippet(t *testing.T) {
	data, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(data), "```go\n")
	snippet, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 || !strings.HasPrefix(snippet, "package main") {
		t.Fatalf("README has no ```go block that is a whole program (package main)")
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "main.go")
	os.WriteFile(src, []byte(snippet), 0o644)
	abs, _ := filepath.Abs("readmesnippet/main.go") // a package that exists only in the overlay
	overlay, _ := json.Marshal(map[string]any{"Replace": map[string]string{abs: src}})
	os.WriteFile(filepath.Join(dir, "overlay.json"), overlay, 0o644)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, filepath.Join(runtime.GOROOT(), "bin", "go"), "run", "-overlay", filepath.Join(dir, "overlay.json"), "./readmesnippet").CombinedOutput()
	if err != nil {
		t.Fatalf("the README's Go snippet does not run: %v\n%s", err, out)
	}
	if got := strings.TrimSpace(string(out)); got != "127.0.2.1:9080 true" {
		t.Fatalf("the README's Go snippet printed %q", got)
	}
}
