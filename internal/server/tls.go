package server

import (
	"crypto/tls"
	"errors"
	"fmt"
)

// loadTLS reads the certificate (with its chain) and private key that the
// server presents, from PEM files. Neither given: nil, plain HTTP. One
// without the other, a file that cannot be read, or a key that is not the
// certificate's: an error that says which, so that serve stops at start
// instead of failing every handshake later.
func loadTLS(certFile, keyFile string) (*tls.Config, error) {
	switch {
	case certFile == "" && keyFile == "":
		return nil, nil
	case certFile == "" || keyFile == "":
		return nil, errors.New("TLS needs a certificate and its private key: give both --tls-cert and --tls-key " +
			"(SCIMESH_TLS_CERT and SCIMESH_TLS_KEY), or neither to serve plain HTTP")
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("TLS certificate %s with key %s: %w (--tls-cert and --tls-key take PEM files: "+
			"the certificate, followed by its intermediates, and its unencrypted private key)", certFile, keyFile, err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}
