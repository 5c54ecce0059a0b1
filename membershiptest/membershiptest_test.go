package membershiptest_test

import (
	"crypto/tls"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/client"
	"example.com/groupmembership/internal/tlstest"
	"example.com/groupmembership/membershiptest"
)

// TestTrialEnds is the README's example.
func TestTrialEnds(t *testing.T) {
	srv := membershiptest.NewServer(t,
		membershiptest.WithClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)),
		membershiptest.WithLimits(membershiptest.Limits{MaxUsers: 100}), // as -max-users
	)
	_, err := srv.Client.Add(t.Context(), "trial",
		[]client.User{client.NewUser(12).WithExpiry(client.ExpiresAfter(time.Hour))})
	require.NoError(t, err)

	srv.Advance(time.Hour)

	_, ok, err := srv.Client.Member(t.Context(), "trial", 12)
	require.NoError(t, err)
	assert.False(t, ok)
}

func TestTheClockNeverGoesBack(t *testing.T) {
	start := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	srv := membershiptest.NewServer(t, membershiptest.WithClock(start))
	srv.Set(start.Add(-time.Hour))
	assert.Equal(t, start, srv.Now())
	srv.Advance(time.Minute)
	assert.Equal(t, start.Add(time.Minute), srv.Now())
}

func TestCloseStopsTheServiceAndMayBeCalledTwice(t *testing.T) {
	srv := membershiptest.NewServer(t)
	_, err := srv.Client.Add(t.Context(), "g", client.Users(1))
	require.NoError(t, err)
	srv.Close()
	srv.Close()
	c, err := client.New(srv.URL, client.WithRetry(client.RetryPolicy{MaxAttempts: 1}))
	require.NoError(t, err)
	_, err = c.ListPage(t.Context(), "g", client.ListOptions{})
	assert.Error(t, err)
}

func TestCloseEndsLongPolls(t *testing.T) {
	srv := membershiptest.NewServer(t)
	done := make(chan error, 1)
	go func() {
		_, err := srv.Client.Changes(t.Context(), client.ChangesOptions{Wait: time.Minute})
		done <- err
	}()
	// Whether the poll is waiting or not yet sent, Close returns without
	// waiting a minute: the poll ends, or finds no service.
	srv.Close()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the long poll outlived Close")
	}
}

func TestWithTLSServesHTTPS(t *testing.T) {
	srv := membershiptest.NewServer(t, membershiptest.WithTLS(nil))
	require.True(t, strings.HasPrefix(srv.URL, "https://127.0.0.1:"), srv.URL)
	require.NotNil(t, srv.Certificate())
	_, err := srv.Client.Add(t.Context(), "g", client.Users(1))
	require.NoError(t, err, "Server.Client trusts the certificate")

	plain, err := client.New(strings.Replace(srv.URL, "https://", "http://", 1), client.WithRetry(client.RetryPolicy{MaxAttempts: 1}))
	require.NoError(t, err)
	_, err = plain.ListPage(t.Context(), "g", client.ListOptions{})
	assert.Error(t, err, "plain HTTP is not served")
	assert.Nil(t, membershiptest.NewServer(t).Certificate(), "no certificate without WithTLS")
}

// WithTLS takes the server's certificates and its client CAs: the service
// sees the certificate a client presents (r.TLS), as the binary's
// -tls-client-ca does.
func TestWithTLSAsksForClientCertificates(t *testing.T) {
	ca, err := tlstest.NewCA("membershiptest CA")
	require.NoError(t, err)
	serverCert, err := ca.Issue(tlstest.Options{})
	require.NoError(t, err)
	clientCert, err := ca.Issue(tlstest.Options{CommonName: "sync-job", Client: true})
	require.NoError(t, err)
	seen := make(chan string, 1)
	srv := membershiptest.NewServer(t,
		membershiptest.WithTLS(&tls.Config{Certificates: []tls.Certificate{serverCert.TLS()},
			ClientAuth: tls.VerifyClientCertIfGiven, ClientCAs: ca.Pool()}),
		membershiptest.WithClientOptions(client.WithTLSConfig(&tls.Config{RootCAs: ca.Pool(), Certificates: []tls.Certificate{clientCert.TLS()}})),
		membershiptest.WithMiddleware(func(next http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
					select {
					case seen <- r.TLS.PeerCertificates[0].Subject.CommonName:
					default:
					}
				}
				next.ServeHTTP(w, r)
			})
		}))
	assert.True(t, srv.Certificate().Equal(serverCert.Leaf))
	_, err = srv.Client.Add(t.Context(), "g", client.Users(1))
	require.NoError(t, err)
	assert.Equal(t, "sync-job", <-seen)
}

func TestPrincipalsReachOnlyTheirGroups(t *testing.T) {
	srv := membershiptest.NewServer(t,
		membershiptest.WithPrincipal("sync-job", "sync-token", "read,write", "team-a/*", "team b"),
		membershiptest.WithPrincipal("ops", "ops-token", "admin", "*"),
		membershiptest.WithFlags("-auth-reads"),
	)
	syncJob, ops := srv.ClientWithToken("sync-token"), srv.ClientWithToken("ops-token")
	_, err := syncJob.Add(t.Context(), "team-a/x", client.Users(1))
	require.NoError(t, err)
	_, err = syncJob.Add(t.Context(), "team b", client.Users(1))
	require.NoError(t, err, "an id with a space")
	_, err = syncJob.Add(t.Context(), "secret", client.Users(1))
	assert.True(t, client.IsForbidden(err), "got %v", err)
	_, err = ops.Add(t.Context(), "secret", client.Users(1))
	require.NoError(t, err)

	page, err := syncJob.GroupsPage(t.Context(), client.PageOptions{})
	require.NoError(t, err)
	var ids []string
	for _, g := range page.Items {
		ids = append(ids, g.Group)
	}
	assert.Equal(t, []string{"team b", "team-a/x"}, ids, "the groups of its scope only")
	assert.Equal(t, 2, page.Total)

	_, err = srv.Client.GroupsPage(t.Context(), client.PageOptions{})
	assert.True(t, client.IsUnauthorized(err), "with -auth-reads, reads need a token: got %v", err)
}
