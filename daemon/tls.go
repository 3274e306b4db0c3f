package daemon

import (
	"crypto/tls"
	"fmt"
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
