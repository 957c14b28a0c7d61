package show

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/scimesh/scimesh/internal/client"
)

func TestHint(t *testing.T) {
	t.Parallel()
	// A coordinator that is not there.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone := client.New("http://"+ln.Addr().String(), "tok")
	ln.Close()
	_, unreachable := gone.GetJob(t.Context(), "s0:j")
	// A coordinator whose certificate this machine does not trust.
	untrusted := fmt.Errorf("get job: %w", &tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}})
	for _, c := range []struct {
		name string
		err  error
		want string
	}{
		{"none", nil, ""},
		{"a token refused", &client.Error{Status: 401, Code: client.CodeUnauthenticated}, "check the token"},
		{"a role refused", &client.Error{Status: 403, Code: client.CodePermissionDenied}, "check the token"},
		{"a coordinator not reached", unreachable, "is the coordinator running and reachable?"},
		{"a coordinator failing", &client.Error{Status: 503, Code: "unavailable"}, ""},
		{"a request refused", &client.Error{Status: 400, Code: client.CodeInvalidArgument}, ""},
		{"a certificate not trusted", untrusted, "set SSL_CERT_FILE"},
		{"another error", errors.New("open the table: no such file"), ""},
	} {
		got := Hint(c.err)
		if c.want == "" && got != "" || !strings.Contains(got, c.want) {
			t.Errorf("%s (%v): hint %q, want %q", c.name, c.err, got, c.want)
		}
	}
}
