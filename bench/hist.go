package main

import (
	"math/bits"
	"time"
)

// hist is a latency histogram that records without allocating: values
// below 128ns exactly, larger ones in 64 buckets per power of two (about
// 1.6% resolution). One per goroutine; merge them at the end.
type hist struct {
	n      int64
	counts [histBuckets]int64
}

const histBuckets = 128 + 64*58

func histIndex(v int64) int {
	if v < 128 {
		return int(max(v, 0))
	}
	shift := bits.Len64(uint64(v)) - 7 // keeps the top 7 bits: 64..127
	return 128 + (shift-1)*64 + int(v>>shift) - 64
}

// histValue is the middle of bucket i.
func histValue(i int) int64 {
	if i < 128 {
		return int64(i)
	}
	shift := (i-128)/64 + 1
	m := int64((i-128)%64 + 64)
	return m<<shift + (int64(1)<<shift)/2
}

func (h *hist) record(d time.Duration) {
	h.counts[histIndex(int64(d))]++
	h.n++
}

func (h *hist) merge(o *hist) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
}

// quantile returns the q-quantile (0 < q <= 1); 0 for an empty histogram.
func (h *hist) quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := int64(q*float64(h.n) + 0.5)
	rank = min(max(rank, 1), h.n)
	var seen int64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			return time.Duration(histValue(i))
		}
	}
	return 0
}
