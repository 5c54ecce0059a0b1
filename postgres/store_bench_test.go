package postgres

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"example.com/groupmembership/postgres/internal/pgtest"
)

// BenchmarkOpenReplaysTheLog measures a start: an instance reads the whole
// log into memory. The log holds 100,000 adds of 3 users to 1,000 groups.
func BenchmarkOpenReplaysTheLog(b *testing.B) {
	benchmarkOpen(b, "NULL, NULL")
}

// BenchmarkOpenReplaysAKeyedLog is BenchmarkOpenReplaysTheLog with every
// change keyed (a key of 36 bytes): the instance remembers every key.
func BenchmarkOpenReplaysAKeyedLog(b *testing.B) {
	benchmarkOpen(b, "'key-' || md5(i::text), decode(md5('f' || i), 'hex')")
}

// benchmarkOpen measures a start on a log of 100,000 adds, whose
// idem_key and idem_fingerprint are idem.
func benchmarkOpen(b *testing.B, idem string) {
	const changes = 100000
	ctx := context.Background()
	url := pgtest.NewDatabase(b)
	s, err := Open(ctx, url, Options{})
	if err != nil {
		b.Fatal(err)
	}
	_ = s.Close()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `INSERT INTO membership_changes (pos, ticket, op, group_id, uids, idem_key, idem_fingerprint)
		SELECT i, 0, 1, 'g' || (i % 1000), ARRAY[i * 3, i * 3 + 1, i * 3 + 2]::bigint[], `+idem+` FROM generate_series(1, $1) AS i`, changes); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		s, err := Open(ctx, url, Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if got := s.Stats().Revision; got != changes {
			b.Fatalf("revision %d after the replay, want %d", got, changes)
		}
		if got := s.Stats().Keys.Held; idem != "NULL, NULL" && got != changes {
			b.Fatalf("%d keys remembered after the replay, want %d", got, changes)
		}
		_ = s.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(changes)*float64(b.N)/b.Elapsed().Seconds(), "changes/s")
}
