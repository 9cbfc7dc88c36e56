package ocitest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// tokenServer is the registry's token service (distribution's token auth):
// it answers GET /token?service=…&scope=… with a JWT signed by a key whose
// self-signed certificate the registry trusts, granting the scope asked
// to the one account (basic auth) and nothing to anyone else.
type tokenServer struct {
	url      string
	certFile string
	key      *ecdsa.PrivateKey
	der      []byte
	user, pw string
}

const (
	tokenService = "mstore-test-registry"
	tokenIssuer  = "mstore-test-issuer"
)

func startTokenServer(t testing.TB, dir, user, pw string) *tokenServer {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: tokenIssuer},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ts := &tokenServer{certFile: filepath.Join(dir, "token.pem"), key: key, der: der, user: user, pw: pw}
	if err := os.WriteFile(ts.certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(ts.serve)}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	ts.url = "http://" + l.Addr().String() + "/token"
	return ts
}

func (ts *tokenServer) serve(w http.ResponseWriter, r *http.Request) {
	u, p, ok := r.BasicAuth()
	var access []map[string]any
	if ok && u == ts.user && p == ts.pw {
		for _, scope := range r.URL.Query()["scope"] {
			parts := strings.Split(scope, ":")
			if len(parts) == 3 && parts[0] == "repository" {
				access = append(access, map[string]any{"type": "repository", "name": parts[1], "actions": strings.Split(parts[2], ",")})
			}
		}
	} else if ok {
		http.Error(w, "wrong credentials", http.StatusUnauthorized)
		return
	}
	tok, err := ts.sign(u, access)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	json.NewEncoder(w).Encode(map[string]any{"token": tok, "access_token": tok, "expires_in": 300})
}

// sign makes an ES256 JWT naming the certificate in its x5c header.
func (ts *tokenServer) sign(sub string, access []map[string]any) (string, error) {
	enc := base64.RawURLEncoding
	now := time.Now().Unix()
	if access == nil {
		access = []map[string]any{}
	}
	h, _ := json.Marshal(map[string]any{"typ": "JWT", "alg": "ES256", "x5c": []string{base64.StdEncoding.EncodeToString(ts.der)}})
	c, _ := json.Marshal(map[string]any{"iss": tokenIssuer, "sub": sub, "aud": tokenService, "exp": now + 300, "nbf": now - 10,
		"iat": now, "jti": fmt.Sprint(now, "-", time.Now().UnixNano()), "access": access})
	signing := enc.EncodeToString(h) + "." + enc.EncodeToString(c)
	sum := sha256.Sum256([]byte(signing))
	r, s, err := ecdsa.Sign(rand.Reader, ts.key, sum[:])
	if err != nil {
		return "", err
	}
	sig := make([]byte, 64)
	r.FillBytes(sig[:32])
	s.FillBytes(sig[32:])
	return signing + "." + enc.EncodeToString(sig), nil
}

func (ts *tokenServer) config() string {
	return fmt.Sprintf("auth:\n  token:\n    realm: %s\n    service: %s\n    issuer: %s\n    rootcertbundle: %s\n", ts.url, tokenService, tokenIssuer, ts.certFile)
}
