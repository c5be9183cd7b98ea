package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/loctree/loctree/shared"
)

// addFormatFlag registers -o/--output with the given formats, the first the
// default, and their shell completion.
func addFormatFlag(cmd *cobra.Command, p *string, formats ...string) {
	cmd.Flags().StringVarP(p, "output", "o", formats[0], fmt.Sprintf("output format: %s", strings.Join(formats, "|")))
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions(formats, cobra.ShellCompDirectiveNoFileComp))
}

// writeData prints v as JSON or YAML (the same keys: YAML is written from
// the JSON form, as kubectl does), for the data formats of -o.
func writeData(w io.Writer, format string, v any) error {
	if format == "yaml" {
		b, err := yaml.Marshal(v)
		if err != nil {
			return fmt.Errorf("encode yaml: %w", err)
		}
		_, err = w.Write(b)
		return err
	}
	return writeJSON(w, v)
}

// isData reports whether format is one writeData prints.
func isData(format string) bool { return format == "json" || format == "yaml" }

func checkFormat(got string, formats ...string) error {
	for _, f := range formats {
		if f == got {
			return nil
		}
	}
	return fmt.Errorf("unknown output format %q (want one of %v)", got, formats)
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// readTree reads and decodes an encoded tree file.
func readTree(path string) (*shared.Tree, error) {
	b, err := readBlob(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	t, err := shared.Decode(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// readBlob reads a tree file header first (shared.ReadBlob), so a wrong
// file or an endless stream costs 64 bytes, not all of it.
func readBlob(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read tree: %w", err)
	}
	defer f.Close()
	return shared.ReadBlob(f)
}
