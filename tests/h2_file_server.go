// A loopback HTTPS server over HTTP/2 answering GETs from one folder, as GitHub's release downloads are
// answered, for the engine tier's plugin-step test (tests/test_engine_tier_preflight.py). Standard library
// only. Usage: h2_file_server FOLDER CERT_PEM_OUT; it writes its self-signed certificate (for 127.0.0.1) to
// CERT_PEM_OUT, prints its port on stdout, and serves until killed.
package main

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
	"net/http"
	"os"
	"time"
)

func main() {
	folder, certOut := os.Args[1], os.Args[2]
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	check(err)
	template := x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "127.0.0.1"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA:                  true,
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, &template, &template, &key.PublicKey, key)
	check(err)
	check(os.WriteFile(certOut, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	check(err)
	fmt.Println(listener.Addr().(*net.TCPAddr).Port)
	server := &http.Server{
		Handler:   http.FileServer(http.Dir(folder)),
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}},
	}
	// ServeTLS offers HTTP/2 (h2) by ALPN, as GitHub does.
	check(server.ServeTLS(listener, "", ""))
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
