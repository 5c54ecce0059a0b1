// Package tlstest makes certificates for tests at test time: a CA, and
// server and client certificates it signs, with ECDSA P-256 keys, as PEM
// and as files. No private key is ever committed. Only tests and the
// benchmarks import it.
package tlstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// CA is a certificate authority that signs certificates.
type CA struct {
	Cert    *x509.Certificate
	CertPEM []byte
	key     *ecdsa.PrivateKey
}

// NewCA returns a new self-signed CA named name, valid from an hour ago
// for a day.
func NewCA(name string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: cert, CertPEM: pemBlock("CERTIFICATE", der), key: key}, nil
}

// Pool returns a pool that trusts the CA alone.
func (ca *CA) Pool() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	return pool
}

// Options say what a certificate is for.
type Options struct {
	// CommonName is the subject's common name.
	CommonName string
	// Hosts are the DNS names and IP addresses it is valid for; a server's
	// certificate with none is valid for localhost, 127.0.0.1 and ::1.
	Hosts []string
	// Client makes it a client's certificate (ExtKeyUsageClientAuth)
	// rather than a server's.
	Client bool
	// NotAfter is when it expires; zero: a day from now.
	NotAfter time.Time
}

// Cert is a certificate and its private key.
type Cert struct {
	Leaf            *x509.Certificate
	CertPEM, KeyPEM []byte
}

// Issue returns a certificate the CA signs, as o says.
func (ca *CA) Issue(o Options) (*Cert, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	if o.NotAfter.IsZero() {
		o.NotAfter = time.Now().Add(24 * time.Hour)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: o.CommonName},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     o.NotAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if o.Client {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	} else if len(o.Hosts) == 0 {
		o.Hosts = []string{"localhost", "127.0.0.1", "::1"}
	}
	for _, h := range o.Hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, err
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	return &Cert{Leaf: leaf, CertPEM: pemBlock("CERTIFICATE", der), KeyPEM: pemBlock("PRIVATE KEY", keyDER)}, nil
}

// TLS returns the certificate as crypto/tls takes it, for a client's
// Certificates.
func (c *Cert) TLS() tls.Certificate {
	pair, err := tls.X509KeyPair(c.CertPEM, c.KeyPEM)
	if err != nil {
		panic(fmt.Sprintf("tlstest: a certificate Issue made does not load: %v", err)) // never: Issue made both
	}
	return pair
}

// WriteFiles writes the certificate and its key into dir as NAME.crt and
// NAME.key (0600), and returns their paths.
func (c *Cert) WriteFiles(dir, name string) (certFile, keyFile string, err error) {
	certFile, keyFile = filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	if err := os.WriteFile(certFile, c.CertPEM, 0o600); err != nil {
		return "", "", err
	}
	return certFile, keyFile, os.WriteFile(keyFile, c.KeyPEM, 0o600)
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

// serial returns a random serial number, as RFC 5280 allows: up to 20
// bytes, positive.
func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err) // crypto/rand never fails
	}
	return n
}

// ClientHello returns the first bytes a TLS client sends, its ClientHello
// as this Go's crypto/tls sends it: half of it is a handshake that stalls.
func ClientHello() ([]byte, error) {
	a, b := net.Pipe()
	defer b.Close()
	go func() {
		_ = tls.Client(a, &tls.Config{ServerName: "localhost"}).Handshake() // fails once b closes
		_ = a.Close()
	}()
	if err := b.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		return nil, err
	}
	buf := make([]byte, 64<<10)
	n, err := b.Read(buf)
	return buf[:n], err
}
