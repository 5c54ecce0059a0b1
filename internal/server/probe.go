package server

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
	"unicode"
)

// probeTimeout bounds a probe: the request, its reply's header and body.
const probeTimeout = time.Second

// probe is the -probe mode, for a container's HEALTHCHECK (the image has no
// shell and no curl): it GETs url and returns nil when the reply is 200
// within probeTimeout, and otherwise an error that says why. It prints one
// line to out either way.
func probe(ctx context.Context, url string, out io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("probe: %w", err)
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
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
