package domain

import "testing"

func TestParseSize(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]int64{
		"0": 0, "1048576": 1 << 20, "500MB": 500e6, "500mb": 500e6, "10GiB": 10 << 30, "10 GiB": 10 << 30,
		"1.5GiB": 3 << 29, "1k": 1000, "2Ki": 2048, "3TB": 3e12, "1TiB": 1 << 40, "7B": 7,
	} {
		if got, err := ParseSize(in); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "GiB", "-1", "10XB", "1.2.3GB", "ten", "99999999999TiB", "1e3"} {
		if got, err := ParseSize(in); err == nil {
			t.Errorf("ParseSize(%q) = %d, want an error", in, got)
		}
	}
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1024: "1 KiB", 1536: "1.5 KiB", 10 << 30: "10 GiB"} {
		if got := SizeText(n); got != want {
			t.Errorf("SizeText(%d) = %q, want %q", n, got, want)
		}
	}
}
