package main

import (
	"encoding/json"
	"fmt"
	"runtime/debug"

	"github.com/spf13/cobra"

	buildversion "github.com/scimesh/scimesh/internal/version"
)

// version and commit are stamped by release builds (tools/release.sh) with
//
//	-ldflags "-X main.version=VERSION -X main.commit=COMMIT"
//
// The linker can set only package-level strings, hence these two
// variables. A plain `go build` leaves them empty, and version.Of reports
// such a build honestly.
var (
	version string
	commit  string
)

func newVersionCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version, the commit and the Go version of this binary",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			info, ok := debug.ReadBuildInfo()
			v := buildversion.Of(version, commit, info, ok)
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
