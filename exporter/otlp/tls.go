package otlp

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"

	grpccreds "google.golang.org/grpc/credentials"
)

// tlsConfig verifies the collector against caFile's bundle; nil (the
// system's roots) without one.
func tlsConfig(caFile string) (*tls.Config, error) {
	if caFile == "" {
		return nil, nil
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("reading the OTLP CA bundle: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("the OTLP CA bundle %s holds no PEM certificate", caFile)
	}
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}

func credentials(c *tls.Config) grpccreds.TransportCredentials { return grpccreds.NewTLS(c) }
