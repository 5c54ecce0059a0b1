package client

import (
	"context"
	"time"
)

// WithFakeClock makes the client's retries sleep with sleep, read the
// time with now, and draw their jitter with rand (nil: as usual). Give it
// after WithRetry.
func WithFakeClock(sleep func(ctx context.Context, d time.Duration) error, now func() time.Time, rand func(n int64) int64) Option {
	return func(c *Client) error {
		c.retry.sleep, c.retry.now = sleep, now
		if rand != nil {
			c.retry.rand = rand
		}
		return nil
	}
}

// CacheStats returns the entries and bytes of c's list cache.
func CacheStats(c *Client) (entries int, bytes int64) { return c.cache.stats() }

// UserAgentOf is the default User-Agent of a client in a binary of build
// information bi.
var UserAgentOf = userAgentOf
