package session

import (
	"sync"
	"time"

	"github.com/fusescope/fusescope/internal/profile"
)

// Shared lets other goroutines take snapshots of a source while a run
// drives it (an exporter's scrapes): it passes Snapshot, Poll, Finish and
// Close on one at a time. A source is not safe for concurrent use.
type Shared struct {
	mu  sync.Mutex
	src Source
}

// NewShared wraps src.
func NewShared(src Source) *Shared { return &Shared{src: src} }

// Snapshot is the source's, taken while no other call runs.
func (s *Shared) Snapshot() (*profile.Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.src.Snapshot()
}

// Close closes the source.
func (s *Shared) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.src.Close()
}

// PollEvery is the source's period, or a second for a source that does
// not poll (its Poll does nothing).
func (s *Shared) PollEvery() time.Duration {
	if p, ok := s.src.(Poller); ok {
		return p.PollEvery()
	}
	return time.Second
}

// Poll polls the source, if it polls.
func (s *Shared) Poll() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p, ok := s.src.(Poller); ok {
		return p.Poll()
	}
	return nil
}

// Settle waits for the source's requests in flight, if it has any.
func (s *Shared) Settle(max time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st, ok := s.src.(Settler); ok {
		return st.Settle(max)
	}
	return nil
}

// Finish ends the source's run, as a Finisher's, or takes its last snapshot.
func (s *Shared) Finish(command *Exit) (*profile.Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f, ok := s.src.(Finisher); ok {
		return f.Finish(command)
	}
	return s.src.Snapshot()
}
