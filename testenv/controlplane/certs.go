package controlplane

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// credentials are the files the API server and its clients share: a CA, the
// API server's serving certificate, the service-account signing key, an
// admin token (group system:masters) in a static token file, and the front
// proxy's CA and client certificate (kubeadm's front-proxy-ca and
// front-proxy-client), which the aggregator presents to aggregated API
// servers.
type credentials struct {
	CACert, ServingCert, ServingKey string // paths
	SAKey, SAPub, TokenFile         string // paths
	FrontProxyCA                    string // path
	ProxyClientCert, ProxyClientKey string // paths
	Token                           string
	caPEM                           []byte
}

// FrontProxyClient is the front proxy's client certificate's common name,
// the API server's --requestheader-allowed-names.
const FrontProxyClient = "front-proxy-client"

// writeCredentials generates all credentials into dir.
func writeCredentials(dir string) (*credentials, error) {
	c := &credentials{
		CACert: filepath.Join(dir, "ca.crt"), ServingCert: filepath.Join(dir, "apiserver.crt"),
		ServingKey: filepath.Join(dir, "apiserver.key"), SAKey: filepath.Join(dir, "sa.key"),
		SAPub: filepath.Join(dir, "sa.pub"), TokenFile: filepath.Join(dir, "tokens.csv"),
		FrontProxyCA: filepath.Join(dir, "front-proxy-ca.crt"), ProxyClientCert: filepath.Join(dir, "front-proxy-client.crt"),
		ProxyClientKey: filepath.Join(dir, "front-proxy-client.key"),
	}
	caKey, caCert, err := writeCA(c.CACert, "drainwatch-testenv-ca")
	if err != nil {
		return nil, err
	}
	c.caPEM = pemBlock("CERTIFICATE", caCert.Raw)
	if err := writeServing(c, caKey, caCert); err != nil {
		return nil, err
	}
	if err := writeSAKeys(c.SAKey, c.SAPub); err != nil {
		return nil, err
	}
	if err := writeFrontProxy(c); err != nil {
		return nil, err
	}
	tok := make([]byte, 16)
	if _, err := rand.Read(tok); err != nil {
		return nil, fmt.Errorf("generating token: %w", err)
	}
	c.Token = hex.EncodeToString(tok)
	line := fmt.Sprintf("%s,admin,admin,\"system:masters\"\n", c.Token)
	if err := os.WriteFile(c.TokenFile, []byte(line), 0o600); err != nil {
		return nil, fmt.Errorf("writing token file: %w", err)
	}
	return c, nil
}

func writeCA(path, cn string) (*ecdsa.PrivateKey, *x509.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generating CA key: %w", err)
	}
	tmpl := certTemplate(cn)
	tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
	tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, fmt.Errorf("signing CA: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, fmt.Errorf("parsing CA: %w", err)
	}
	return key, cert, os.WriteFile(path, pemBlock("CERTIFICATE", der), 0o644)
}

func writeServing(c *credentials, caKey *ecdsa.PrivateKey, ca *x509.Certificate) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("generating serving key: %w", err)
	}
	tmpl := certTemplate("kube-apiserver")
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP(serviceIP)}
	tmpl.DNSNames = []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return fmt.Errorf("signing serving certificate: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return fmt.Errorf("encoding serving key: %w", err)
	}
	if err := os.WriteFile(c.ServingCert, pemBlock("CERTIFICATE", der), 0o644); err != nil {
		return fmt.Errorf("writing serving certificate: %w", err)
	}
	return os.WriteFile(c.ServingKey, pemBlock("EC PRIVATE KEY", keyDER), 0o600)
}

// writeFrontProxy writes the front proxy's own CA (not the cluster's: a
// client certificate of the cluster's CA must not be able to assert
// identities) and its client certificate.
func writeFrontProxy(c *credentials) error {
	caKey, ca, err := writeCA(c.FrontProxyCA, "drainwatch-testenv-front-proxy-ca")
	if err != nil {
		return err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("generating the front proxy's key: %w", err)
	}
	tmpl := certTemplate(FrontProxyClient)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return fmt.Errorf("signing the front proxy's certificate: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return fmt.Errorf("encoding the front proxy's key: %w", err)
	}
	if err := os.WriteFile(c.ProxyClientCert, pemBlock("CERTIFICATE", der), 0o644); err != nil {
		return fmt.Errorf("writing the front proxy's certificate: %w", err)
	}
	return os.WriteFile(c.ProxyClientKey, pemBlock("EC PRIVATE KEY", keyDER), 0o600)
}

func writeSAKeys(keyPath, pubPath string) error {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return fmt.Errorf("generating service-account key: %w", err)
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return fmt.Errorf("encoding service-account public key: %w", err)
	}
	if err := os.WriteFile(keyPath, pemBlock("RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(key)), 0o600); err != nil {
		return fmt.Errorf("writing service-account key: %w", err)
	}
	return os.WriteFile(pubPath, pemBlock("PUBLIC KEY", pub), 0o644)
}

func certTemplate(cn string) *x509.Certificate {
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	return &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(7 * 24 * time.Hour),
	}
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}
