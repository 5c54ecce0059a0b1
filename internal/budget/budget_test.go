package budget

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBytesTakesWhatFitsAndRefusesTheRest(t *testing.T) {
	b := New(100)
	require.True(t, b.TryTake(60))
	assert.True(t, b.Has(40))
	assert.False(t, b.Has(41))
	assert.False(t, b.TryTake(41), "60 + 41 is over 100")
	assert.Equal(t, int64(60), b.Used(), "a refused take takes nothing")
	require.True(t, b.TryTake(40))
	assert.False(t, b.Has(1))
	assert.False(t, b.TryTake(1))
	assert.Equal(t, uint64(2), b.Refused())
	b.Refuse()
	assert.Equal(t, uint64(3), b.Refused(), "a refusal the caller decided counts too")
	b.Give(60)
	b.Give(40)
	assert.Zero(t, b.Used())
	assert.True(t, b.Has(1000), "an empty budget has room for anything once")
}

func TestBytesServesOneRequestLargerThanTheWholeBudgetAlone(t *testing.T) {
	b := New(100)
	require.True(t, b.TryTake(500), "alone, it is taken")
	assert.False(t, b.TryTake(1), "and nothing else meanwhile")
	b.Give(500)
	require.True(t, b.TryTake(1))
	assert.False(t, b.TryTake(500), "not alone: refused")
}

func TestBytesNeverGoesOverItsLimitUnderConcurrentTakes(t *testing.T) {
	b := New(1000)
	var wg sync.WaitGroup
	var mu sync.Mutex
	peak := int64(0)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 10000 {
				if b.TryTake(30) {
					mu.Lock()
					peak = max(peak, b.Used())
					mu.Unlock()
					b.Give(30)
				}
			}
		}()
	}
	wg.Wait()
	assert.LessOrEqual(t, peak, int64(1000))
	assert.Zero(t, b.Used())
}
