package show

import (
	"crypto/tls"
	"errors"

	"github.com/scimesh/scimesh/internal/client"
)

// Hint says what to check after err, a client call's error, when the
// cause is likely in the caller's settings: a certificate not trusted
// here, a token refused, a coordinator not reached. It is "" otherwise.
func Hint(err error) string {
	var ce *client.Error
	var cv *tls.CertificateVerificationError
	switch {
	case err == nil:
		return ""
	case errors.As(err, &cv):
		return "the coordinator's TLS certificate is not trusted here: for a private certificate authority, " +
			"set SSL_CERT_FILE to the PEM file of its certificate"
	case errors.As(err, &ce) && (ce.Status == 401 || ce.Status == 403):
		return "check the token: --token or SCIMESH_TOKEN must hold your account's token, or the client token"
	case !errors.As(err, &ce) && client.IsRetryable(err):
		return "is the coordinator running and reachable? set --coordinator or SCIMESH_COORDINATOR"
	}
	return ""
}
