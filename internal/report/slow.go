package report

import (
	"fmt"
	"io"
	"strconv"

	"github.com/fusescope/fusescope/internal/hist"
	"github.com/fusescope/fusescope/internal/profile"
)

// The columns of trace --slower's lines: fixed widths, since the lines are
// printed as the requests end, as bcc's *slower tools print theirs.
const slowFormat = "%-12s %-16s %7s %-12s %9s %-8s %7s %7s %10s %s\n"

// WriteSlowHeader writes the header of trace --slower's lines.
func WriteSlowHeader(w io.Writer, u hist.Unit) error {
	_, err := fmt.Fprintf(w, slowFormat, "TIME", "COMM", "PID", "OP", "LAT("+shortUnit(u)+")", "ERRNO", "REQ", "REPLY", "NODEID", "MOUNT")
	return err
}

// WriteSlow writes one request that took at least trace --slower, under
// WriteSlowHeader. Names that came from the trace are quoted when they hold
// spaces or control characters, so that they neither split a column nor
// reach the terminal raw.
func WriteSlow(w io.Writer, r profile.SlowRequest, u hist.Unit) error {
	errno := r.Errno
	if errno == "" {
		errno = "-"
	}
	comm, mount := Name(r.Comm), Name(r.Mount)
	if comm == "" {
		comm = "?"
	}
	if mount == "" {
		mount = "conn:" + strconv.FormatUint(uint64(r.Conn), 10) // one column, as the rest
	}
	_, err := fmt.Fprintf(w, slowFormat, r.End.Format("15:04:05.000"), comm, strconv.FormatUint(uint64(r.PID), 10), Name(r.Op),
		inUnit(float64(r.Latency.Nanoseconds()), u), Name(errno), Bytes(uint64(r.ReqBytes)), Bytes(uint64(r.ReplyBytes)),
		strconv.FormatUint(r.NodeID, 10), mount)
	return err
}
