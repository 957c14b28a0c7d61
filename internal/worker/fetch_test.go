package worker

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestGetRange reads signed inputs from a stand-in store: the Range header
// is sent, a 206 is read, and a store that ignores the range (200), one
// that redirects and one that refuses the signature (403) are errors that
// say so, none of them quoting the URL's signature.
func TestGetRange(t *testing.T) {
	t.Parallel()
	var gotRange string
	store := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotRange = r.Header.Get("Range")
		switch r.URL.Path {
		case "/ok":
			w.WriteHeader(http.StatusPartialContent)
			io.WriteString(w, "a,1\n")
		case "/whole":
			io.WriteString(w, "id,x\na,1\nb,2\n")
		case "/moved":
			http.Redirect(w, r, "/ok?X-Amz-Signature=other", http.StatusFound)
		default:
			http.Error(w, "SignatureDoesNotMatch", http.StatusForbidden)
		}
	}))
	defer store.Close()
	policy, err := parseHostPolicy([]string{"example.org"}) // loopback refused for hosted inputs
	if err != nil {
		t.Fatal(err)
	}
	f := newFetcher(policy, "test")
	defer f.close()
	const sig = "?X-Amz-Signature=topsecret"
	body, err := f.getRange(t.Context(), store.URL+"/ok"+sig, "bytes=5-8")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(body)
	body.Close()
	if string(b) != "a,1\n" || gotRange != "bytes=5-8" {
		t.Fatalf("read %q with Range %q; want a,1 and bytes=5-8", b, gotRange)
	}
	for path, want := range map[string]string{"/whole": "does not honour Range", "/moved": "not redirected", "/denied": "expired or does not match"} {
		_, err := f.getRange(t.Context(), store.URL+path+sig, "bytes=5-8")
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "topsecret") {
			t.Errorf("GET %s: %v; want an error saying %q without the signature", path, err, want)
		}
	}
	// Not there at all: the dial's error quotes no signature either.
	_, err = f.getRange(t.Context(), "http://127.0.0.1:1/x"+sig, "bytes=0-1")
	if err == nil || strings.Contains(err.Error(), "topsecret") {
		t.Errorf("GET of a closed port: %v; want an error without the signature", err)
	}
	// A hosted input on loopback stays refused by the host rules.
	if _, err := f.get(t.Context(), store.URL+"/ok"+sig); err == nil || strings.Contains(err.Error(), "topsecret") {
		t.Errorf("hosted GET on loopback: %v; want a refusal without the signature", err)
	}
}
