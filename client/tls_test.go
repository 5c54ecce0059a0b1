package client_test

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/client"
	"example.com/groupmembership/internal/tlstest"
	"example.com/groupmembership/membershiptest"
)

func TestWithTLSConfigTrustsItsRoots(t *testing.T) {
	srv := membershiptest.NewServer(t, membershiptest.WithTLS(nil))
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	c, err := client.New(srv.URL, client.WithTLSConfig(&tls.Config{RootCAs: roots}))
	require.NoError(t, err)
	_, err = c.Add(t.Context(), "g", client.Users(1))
	require.NoError(t, err)

	stranger, err := tlstest.NewCA("a CA the service's certificate is not of")
	require.NoError(t, err)
	c, err = client.New(srv.URL, client.WithTLSConfig(&tls.Config{RootCAs: stranger.Pool()}),
		client.WithRetry(client.RetryPolicy{MaxAttempts: 1}))
	require.NoError(t, err)
	_, err = c.Add(t.Context(), "g", client.Users(2))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "certificate signed by unknown authority")
}

func TestWithTLSConfigRefusesWhatCannotWork(t *testing.T) {
	tests := []struct {
		name string
		url  string
		opts []client.Option
		want string
	}{
		{"nil", "https://localhost:8443", []client.Option{client.WithTLSConfig(nil)}, "membership: WithTLSConfig: nil *tls.Config"},
		{"an http:// URL", "http://localhost:8080", []client.Option{client.WithTLSConfig(&tls.Config{})},
			"membership: WithTLSConfig: the base URL http://localhost:8080 is not https://"},
		{"with WithHTTPClient", "https://localhost:8443", []client.Option{client.WithTLSConfig(&tls.Config{}), client.WithHTTPClient(&http.Client{})},
			"membership: WithTLSConfig and WithHTTPClient: set the TLS configuration in the http.Client's transport"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := client.New(tt.url, tt.opts...)
			require.Error(t, err)
			assert.Equal(t, tt.want, err.Error())
		})
	}
}
