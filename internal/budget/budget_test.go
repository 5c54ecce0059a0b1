package budget

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBytesTakesWhatFitsAndRefusesTheRest(t *testing.T) {
	b := New(100)
	require.True(t, b.tryTake(60))
	assert.True(t, b.Has(40))
	assert.False(t, b.Has(41))
	assert.False(t, b.tryTake(41), "60 + 41 is over 100")
	assert.Equal(t, int64(60), b.Used(), "a refused take takes nothing")
	require.True(t, b.tryTake(40))
	assert.False(t, b.Has(1))
	assert.False(t, b.tryTake(1))
	assert.Equal(t, uint64(2), b.Refused())
	b.Refuse()
	assert.Equal(t, uint64(3), b.Refused(), "a refusal the caller decided counts too")
	b.give(60)
	b.give(40)
	assert.Zero(t, b.Used())
	assert.True(t, b.Has(1000), "an empty budget has room for anything once")
}

func TestBytesServesOneRequestLargerThanTheWholeBudgetAlone(t *testing.T) {
	b := New(100)
	require.True(t, b.tryTake(500), "alone, it is taken")
	assert.False(t, b.tryTake(1), "and nothing else meanwhile")
	b.give(500)
	require.True(t, b.tryTake(1))
	assert.False(t, b.tryTake(500), "not alone: refused")
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
				if b.tryTake(30) {
					mu.Lock()
					peak = max(peak, b.Used())
					mu.Unlock()
					b.give(30)
				}
			}
		}()
	}
	wg.Wait()
	assert.LessOrEqual(t, peak, int64(1000))
	assert.Zero(t, b.Used())
}

func TestLeaseGivesBackWhatItHoldsOnce(t *testing.T) {
	b := New(100)
	l, ok := b.Take(30)
	require.True(t, ok)
	require.True(t, l.Grow(50))
	assert.False(t, l.Grow(21), "30 + 50 + 21 is over 100")
	assert.Equal(t, int64(80), l.Held())
	assert.Equal(t, int64(80), b.Used())
	l.Release()
	l.Release()
	assert.Zero(t, b.Used(), "released once, whatever the calls")
	assert.Zero(t, l.Held())
}

func TestLeaseRefusedHoldsNothing(t *testing.T) {
	b := New(100)
	other, ok := b.Take(90)
	require.True(t, ok)
	l, ok := b.Take(20)
	assert.False(t, ok)
	l.Release()
	assert.Equal(t, int64(90), b.Used(), "releasing a refused lease gives back nothing")
	other.Release()
	assert.Zero(t, b.Used())
}

func TestLeaseResizeTakesAloneWhatTheBudgetCannotHold(t *testing.T) {
	b := New(100)
	l, ok := b.Take(60)
	require.True(t, ok)
	require.True(t, l.Resize(500), "alone, the whole of it is taken at once")
	assert.Equal(t, int64(500), b.Used())
	other, ok := b.Take(1)
	assert.False(t, ok)
	other.Release()
	l.Release()
	m, ok := b.Take(60)
	require.True(t, ok)
	n, ok := b.Take(30)
	require.True(t, ok)
	assert.False(t, m.Resize(80), "not alone: 30 + 80 is over 100")
	assert.Zero(t, m.Held(), "a refused resize holds nothing")
	assert.Equal(t, int64(30), b.Used())
	n.Release()
}
