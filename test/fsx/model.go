package fsx

// model is what the file must hold after each operation.
type model struct {
	data []byte
}

func (m *model) size() int64 { return int64(len(m.data)) }

// resize grows the file with zeros or shortens it.
func (m *model) resize(n int64) {
	if n <= m.size() {
		m.data = m.data[:n]
		return
	}
	if n <= int64(cap(m.data)) {
		old := len(m.data)
		m.data = m.data[:n]
		clear(m.data[old:])
		return
	}
	grown := make([]byte, n, n+n/4)
	copy(grown, m.data)
	m.data = grown
}

// read is what a read of op.Len bytes at op.Off returns: the bytes up to
// the end of the file.
func (m *model) read(off, n int64) []byte {
	if off >= m.size() {
		return nil
	}
	return m.data[off:min(off+n, m.size())]
}

// apply changes the model as op changes the file.
func (m *model) apply(op Op) {
	switch op.Kind {
	case Write, Pwrite, MapWrite:
		end := op.Off + op.Len
		if end > m.size() {
			m.resize(end)
		}
		fill(m.data[op.Off:end], op.Index, op.Off)
	case Truncate:
		m.resize(op.Off)
	case Falloc:
		if end := op.Off + op.Len; end > m.size() {
			m.resize(end)
		}
	case PunchHole:
		if op.Off < m.size() {
			clear(m.data[op.Off:min(op.Off+op.Len, m.size())])
		}
	case ZeroRange:
		end := op.Off + op.Len
		if end > m.size() {
			m.resize(end)
		}
		clear(m.data[op.Off:end])
	case CopyRange:
		src := m.read(op.Off, op.Len)
		src = append([]byte(nil), src...)
		if end := op.Dst + int64(len(src)); end > m.size() {
			m.resize(end)
		}
		copy(m.data[op.Dst:], src)
	}
}

// changed is the range of the file an operation may have changed, for
// reading back: [lo, hi). ok is false for operations that change nothing.
func changed(op Op, before int64) (lo, hi int64, ok bool) {
	switch op.Kind {
	case Write, Pwrite, MapWrite, Falloc, ZeroRange, PunchHole:
		return op.Off, op.Off + op.Len, true
	case CopyRange:
		return op.Dst, op.Dst + op.Len, true
	case Truncate:
		return min(op.Off, before), max(op.Off, before), true
	}
	return 0, 0, false
}
