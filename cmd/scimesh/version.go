package main

import (
	"encoding/json"
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// version and commit are stamped by release builds (tools/release.sh) with
//
//	-ldflags "-X main.version=VERSION -X main.commit=COMMIT"
//
// The linker can set only package-level strings, hence these two
// variables. A plain `go build` leaves them empty, and versionOf reports
// such a build honestly.
var (
	version string
	commit  string
)

// versionInfo is what `scimesh version` prints.
type versionInfo struct {
	Version  string `json:"version"`
	Commit   string `json:"commit"`
	Go       string `json:"go"`
	Platform string `json:"platform"`
}

// versionOf says which build this is. A stamped version and commit win.
// Without them the version is "dev" and the commit is the one the Go
// toolchain recorded (vcs.revision, with "-dirty" when the tree had
// changes), or "unknown" when it recorded none.
func versionOf(stampedVersion, stampedCommit string, info *debug.BuildInfo, ok bool) versionInfo {
	v := versionInfo{Version: stampedVersion, Commit: stampedCommit, Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if v.Version == "" {
		v.Version = "dev"
	}
	if v.Commit == "" && ok {
		var modified bool
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				v.Commit = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
		if v.Commit != "" && modified {
			v.Commit += "-dirty"
		}
	}
	if v.Commit == "" {
		v.Commit = "unknown"
	}
	return v
}

func newVersionCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version, the commit and the Go version of this binary",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			info, ok := debug.ReadBuildInfo()
			v := versionOf(version, commit, info, ok)
			out := cmd.OutOrStdout()
			if asJSON {
				return json.NewEncoder(out).Encode(v)
			}
			_, err := fmt.Fprintf(out, "scimesh %s\ncommit   %s\ngo       %s\nplatform %s\n", v.Version, v.Commit, v.Go, v.Platform)
			return err
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the version as a JSON object")
	return cmd
}
