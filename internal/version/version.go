// Package version says which build of scimesh is running: the version and
// commit a release stamps, or those the Go toolchain recorded.
package version

import (
	"runtime"
	"runtime/debug"
)

// Info is what `scimesh version` prints.
type Info struct {
	Version  string `json:"version"`
	Commit   string `json:"commit"`
	Go       string `json:"go"`
	Platform string `json:"platform"`
}

// Of says which build this is, from the version and commit a release
// build stamps (empty in a plain build) and the build information the Go
// toolchain recorded (debug.ReadBuildInfo). A stamped version and commit win.
// Without them the version is "dev" and the commit is the one the Go
// toolchain recorded (vcs.revision, with "-dirty" when the tree had
// changes), or "unknown" when it recorded none.
func Of(stampedVersion, stampedCommit string, info *debug.BuildInfo, ok bool) Info {
	v := Info{Version: stampedVersion, Commit: stampedCommit, Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
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
