package daemon

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"net"
	"os"
	"sync"
	"time"

	"github.com/rs/zerolog"
)

// servingCert serves a certificate and key from files and reloads them
// when either changes (a renewed Secret mounted in the pod: the kubelet
// swaps the files' symlink). It stats both files at each TLS handshake, so
// the next connection after a renewal gets the new certificate without a
// restart, a file watcher or a poll interval.
type servingCert struct {
	certFile, keyFile string
	log               zerolog.Logger

	mu      sync.Mutex
	stamp   fileStamps
	current *tls.Certificate
	// broken is the version of the files that failed to load, not retried
	// (nor logged) at every handshake.
	broken fileStamps
}

// fileStamps identify a version of the two files.
type fileStamps [2]struct {
	mod  time.Time
	size int64
}

// newServingCert loads the pair once: a missing or broken pair at start is
// a configuration error.
func newServingCert(certFile, keyFile string, log zerolog.Logger) (*servingCert, error) {
	c := &servingCert{certFile: certFile, keyFile: keyFile, log: log}
	if _, err := c.certificate(); err != nil {
		return nil, err
	}
	return c, nil
}

// tlsConfig is the server's TLS configuration (TLS 1.2 at least).
func (c *servingCert) tlsConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return c.certificate()
		},
	}
}

// certificate returns the current pair, reloaded when the files changed.
// A pair that fails to load (a renewal caught half-written) keeps the
// previous one in service until the files load again.
func (c *servingCert) certificate() (*tls.Certificate, error) {
	stamp, err := c.stamps()
	c.mu.Lock()
	defer c.mu.Unlock()
	if err == nil && c.current != nil && (stamp == c.stamp || stamp == c.broken) {
		return c.current, nil
	}
	if err == nil {
		var pair tls.Certificate
		if pair, err = tls.LoadX509KeyPair(c.certFile, c.keyFile); err == nil {
			c.current, c.stamp = &pair, stamp
			c.log.Info().Str("cert", c.certFile).Msg("loaded the serving certificate")
			return c.current, nil
		}
	}
	err = fmt.Errorf("loading the serving certificate %s and key %s: %w", c.certFile, c.keyFile, err)
	if c.current == nil {
		return nil, err
	}
	c.broken = stamp
	c.log.Warn().Err(err).Msg("keeping the previous serving certificate")
	return c.current, nil
}

func (c *servingCert) stamps() (fileStamps, error) {
	var s fileStamps
	for i, f := range []string{c.certFile, c.keyFile} {
		fi, err := os.Stat(f)
		if err != nil {
			return s, err
		}
		s[i].mod, s[i].size = fi.ModTime(), fi.Size()
	}
	return s, nil
}

// selfSignedConfig serves a certificate generated at start, as
// controller-runtime's metrics server and kube-rbac-proxy do without a
// mounted one: the connection is encrypted (the bearer tokens of scrapers
// are not sent in clear text), and clients skip the verification of a
// certificate nobody can check (insecureSkipVerify).
func selfSignedConfig(host string) (*tls.Config, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating the self-signed serving key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, fmt.Errorf("generating the self-signed serial: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: "drainwatch@" + host},
		DNSNames: []string{host, "localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		NotBefore: now.Add(-time.Hour), NotAfter: now.AddDate(1, 0, 0),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("signing the self-signed serving certificate: %w", err)
	}
	cert := tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
	return &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}, nil
}
