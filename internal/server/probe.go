package server

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
	"unicode"

	"example.com/groupmembership/internal/tlscert"
)

// probeTimeout bounds a probe: the request, its reply's header and body.
const probeTimeout = time.Second

// probeHere is the -probe mode given a path: it asks this machine's
// service (probeURL), over TLS when cfg serves it, trusting the
// certificate of -tls-cert (tlscert.ProbeConfig).
func probeHere(ctx context.Context, cfg Config, out io.Writer) error {
	var tlsConfig *tls.Config
	if cfg.tlsCert != "" {
		var err error
		if tlsConfig, err = tlscert.ProbeConfig(cfg.tlsCert); err != nil {
			return fmt.Errorf("probe: %w", err)
		}
	}
	return probe(ctx, probeURL(cfg, cfg.probe), tlsConfig, out)
}

// probe is the -probe mode, for a container's HEALTHCHECK (the image has no
// shell and no curl): it GETs url and returns nil when the reply is 200
// within probeTimeout, and otherwise an error that says why. It prints one
// line to out either way. tlsConfig, when set, is how it trusts an https
// URL; nil: as any client does.
func probe(ctx context.Context, url string, tlsConfig *tls.Config, out io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("probe: %w", err)
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	if tlsConfig != nil {
		client.Transport = &http.Transport{TLSClientConfig: tlsConfig, DisableKeepAlives: true}
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("probe %s: %w", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512)) // what the service says why, when it is not ready
	if resp.StatusCode != http.StatusOK {
		why := printable(string(body))
		if loc := resp.Header.Get("Location"); loc != "" {
			why = "redirected to " + printable(loc) + " (not followed)"
		}
		if resp.StatusCode == http.StatusBadRequest && strings.Contains(why, "HTTP request to an HTTPS server") {
			why = "the service speaks TLS: give the probe -tls-cert, or MEMBERSHIP_TLS_CERT (a HEALTHCHECK sees the environment, not the service's flags)"
		}
		return fmt.Errorf("probe %s: %s: %s", url, resp.Status, why)
	}
	fmt.Fprintf(out, "probe %s: %s\n", url, resp.Status)
	return nil
}

// printable returns s with every control character (newlines, terminal
// escapes) as a space: it ends up in a container's health log.
func printable(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
}
