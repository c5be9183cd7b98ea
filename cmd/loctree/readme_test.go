package main

import (
	"bufio"
	"context"
	"os"
	"os/exec"
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
