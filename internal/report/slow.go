package report

import (
	"fmt"
	"io"
	"strconv"

	"github.com/fusescope/fusescope/internal/hist"
	"github.com/fusescope/fusescope/internal/profile"
)

// The columns of trace --slower's lines: fixed widths, since the lines are
// printed as the requests end, as bcc's *slower tools print theirs. With
// --stages, the queue, daemon and reply times follow the latency.
const (
	slowFormat       = "%-12s %-16s %7s %-12s %9s %-8s %7s %7s %10s %s %s\n"
	slowStagesFormat = "%-12s %-16s %7s %-12s %9s %9s %9s %9s %-8s %7s %7s %10s %s %s\n"
)

// WriteSlowHeader writes the header of trace --slower's lines; stages adds
// the columns of --stages.
func WriteSlowHeader(w io.Writer, u hist.Unit, stages bool) error {
	su := "(" + shortUnit(u) + ")"
	if stages {
		_, err := fmt.Fprintf(w, slowStagesFormat, "TIME", "COMM", "PID", "OP", "LAT"+su, "QUEUE"+su, "DAEMON"+su, "REPLY"+su,
			"ERRNO", "REQ", "REPLY", "NODEID", "MOUNT", "FILE")
		return err
	}
	_, err := fmt.Fprintf(w, slowFormat, "TIME", "COMM", "PID", "OP", "LAT"+su, "ERRNO", "REQ", "REPLY", "NODEID", "MOUNT", "FILE")
	return err
}

// WriteSlow writes one request that took at least trace --slower, under
// WriteSlowHeader with the same stages. Names that came from the trace are
// quoted when they hold spaces or control characters, so that they
// neither split a column nor reach the terminal raw. A stage not seen is
// "-". FILE is the node's path in its mount, "?" when its name is not known
// (looked up before the trace began) and "-" for no node.
func WriteSlow(w io.Writer, r profile.SlowRequest, u hist.Unit, stages bool) error {
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
	file := Name(r.File)
	switch {
	case r.NodeID == 0:
		file = "-" // about no node, or the classic tracepoints: none carried
	case file == "":
		file = "?" // looked up before the trace began
	}
	at, pid, lat := r.End.Format("15:04:05.000"), strconv.FormatUint(uint64(r.PID), 10), inUnit(float64(r.Latency.Nanoseconds()), u)
	req, reply, node := Bytes(uint64(r.ReqBytes)), Bytes(uint64(r.ReplyBytes)), strconv.FormatUint(r.NodeID, 10)
	if stages {
		st := [3]string{"-", "-", "-"}
		if len(r.Stages) == 3 {
			for i, d := range r.Stages {
				st[i] = inUnit(float64(d.Nanoseconds()), u)
			}
		}
		_, err := fmt.Fprintf(w, slowStagesFormat, at, comm, pid, Name(r.Op), lat, st[0], st[1], st[2], Name(errno), req, reply, node, mount, file)
		return err
	}
	_, err := fmt.Fprintf(w, slowFormat, at, comm, pid, Name(r.Op), lat, Name(errno), req, reply, node, mount, file)
	return err
}
