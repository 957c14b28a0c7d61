package version

import (
	"runtime"
	"runtime/debug"
	"testing"
)

func TestOf(t *testing.T) {
	t.Parallel()
	vcs := func(settings ...string) *debug.BuildInfo {
		info := &debug.BuildInfo{}
		for i := 0; i < len(settings); i += 2 {
			info.Settings = append(info.Settings, debug.BuildSetting{Key: settings[i], Value: settings[i+1]})
		}
		return info
	}
	for _, tc := range []struct {
		name            string
		version, commit string
		info            *debug.BuildInfo
		ok              bool
		wantV, wantC    string
	}{
		{"stamped", "v1.2.3", "abc123", vcs("vcs.revision", "fff"), true, "v1.2.3", "abc123"},
		{"plain build in a clean tree", "", "", vcs("vcs.revision", "abc123", "vcs.modified", "false"), true, "dev", "abc123"},
		{"plain build in a changed tree", "", "", vcs("vcs.revision", "abc123", "vcs.modified", "true"), true, "dev", "abc123-dirty"},
		{"plain build outside git", "", "", vcs("-trimpath", "true"), true, "dev", "unknown"},
		{"no build info", "", "", nil, false, "dev", "unknown"},
	} {
		got := Of(tc.version, tc.commit, tc.info, tc.ok)
		if got.Version != tc.wantV || got.Commit != tc.wantC {
			t.Errorf("%s: got version %q commit %q, want %q %q", tc.name, got.Version, got.Commit, tc.wantV, tc.wantC)
		}
		if got.Go != runtime.Version() || got.Platform != runtime.GOOS+"/"+runtime.GOARCH {
			t.Errorf("%s: got go %q platform %q, want %q %s/%s", tc.name, got.Go, got.Platform, runtime.Version(), runtime.GOOS, runtime.GOARCH)
		}
	}
}
