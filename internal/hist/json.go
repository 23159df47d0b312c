package hist

import (
	"encoding/json"
	"fmt"
)

// wire is the JSON form of a histogram (docs/record.md): buckets are listed up
// to the last non-empty one; bucket i holds [2^i, 2^(i+1)) ns.
type wire struct {
	Unit    string   `json:"unit"`
	Count   uint64   `json:"count"`
	Sum     uint64   `json:"sum"`
	Min     uint64   `json:"min"`
	Max     uint64   `json:"max"`
	Buckets []uint64 `json:"buckets"`
	// Fine: the non-empty sub-buckets as [index, count] pairs (Hist.Fine).
	Fine [][2]uint64 `json:"fine,omitempty"`
}

// MarshalJSON writes the histogram in the record format.
func (h Hist) MarshalJSON() ([]byte, error) {
	last := -1
	for i, c := range h.Buckets {
		if c > 0 {
			last = i
		}
	}
	w := wire{Unit: "ns", Count: h.Count, Sum: h.Sum, Min: h.Min, Max: h.Max, Buckets: h.Buckets[:last+1]}
	for i, c := range h.Fine {
		if c > 0 {
			w.Fine = append(w.Fine, [2]uint64{uint64(i), c})
		}
	}
	return json.Marshal(w)
}

// UnmarshalJSON reads the record format and checks that it is consistent.
func (h *Hist) UnmarshalJSON(b []byte) error {
	var w wire
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	if w.Unit != "ns" {
		return fmt.Errorf("histogram unit %q, want \"ns\"", w.Unit)
	}
	if len(w.Buckets) > NumBuckets {
		return fmt.Errorf("histogram has %d buckets, at most %d", len(w.Buckets), NumBuckets)
	}
	var n Hist
	for i, c := range w.Buckets {
		n.Buckets[i] = c
		n.Count += c
		if n.Count < c {
			return fmt.Errorf("histogram bucket counts overflow")
		}
	}
	if n.Count != w.Count {
		return fmt.Errorf("histogram count %d differs from its buckets' total %d", w.Count, n.Count)
	}
	if w.Count > 0 && (w.Min > w.Max || Bucket(w.Min) > Bucket(w.Max)) {
		return fmt.Errorf("histogram min %d exceeds max %d", w.Min, w.Max)
	}
	n.Sum, n.Min, n.Max = w.Sum, w.Min, w.Max
	if len(w.Fine) > 0 {
		n.Fine = make([]uint64, FineLen)
		for _, p := range w.Fine {
			if p[0] >= FineLen {
				return fmt.Errorf("histogram sub-bucket %d, at most %d", p[0], FineLen-1)
			}
			n.Fine[p[0]] += p[1]
		}
	}
	*h = n
	return nil
}
