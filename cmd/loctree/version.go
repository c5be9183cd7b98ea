package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/loctree/loctree/shared"
)

// versionInfo is what `loctree version` prints.
type versionInfo struct {
	Module        string `json:"module"`
	Version       string `json:"version"`
	Revision      string `json:"revision"`
	Time          string `json:"time,omitempty"`
	Modified      bool   `json:"modified"`
	GoVersion     string `json:"go_version"`
	FormatVersion int    `json:"format_version"`
}

// revision is the VCS revision `make build` links in (-X main.revision=...)
// for builds Go does not stamp itself: Go stamps vcs.revision only where
// .git is a directory, not in a git worktree.
var revision string

// buildVersion reads the module version and VCS stamp Go put in the
// binary (`go build` in a git checkout stamps the revision; `go install
// module@version` the version; `go run` neither).
func buildVersion() versionInfo {
	v := versionInfo{Module: "github.com/loctree/loctree", Version: "(unknown)", Revision: "(unknown)",
		GoVersion: runtime.Version(), FormatVersion: shared.FormatVersion}
	if revision != "" {
		v.Revision = revision
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return v
	}
	if bi.Main.Path != "" {
		v.Module = bi.Main.Path
	}
	if bi.Main.Version != "" {
		v.Version = bi.Main.Version
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Revision = s.Value
		case "vcs.time":
			v.Time = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	return v
}

func (v versionInfo) String() string {
	rev := v.Revision
	if v.Modified {
		rev += " (modified)"
	}
	return fmt.Sprintf("loctree %s (%s)\nrevision %s\n%s %s/%s\ntree format %d\n",
		v.Version, v.Module, rev, v.GoVersion, runtime.GOOS, runtime.GOARCH, v.FormatVersion)
}

func newVersionCmd() *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the module version, VCS revision, Go version and tree format version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFormat(format, "text", "json", "yaml"); err != nil {
				return err
			}
			return printVersion(cmd.OutOrStdout(), format)
		},
	}
	addFormatFlag(cmd, &format, "text", "json", "yaml")
	return cmd
}

func printVersion(w io.Writer, format string) error {
	v := buildVersion()
	if isData(format) {
		return writeData(w, format, v)
	}
	_, err := io.WriteString(w, v.String())
	return err
}
