package sysserve

import (
	"encoding/gob"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/fusescope/fusescope/internal/ktrace"
	"github.com/fusescope/fusescope/internal/option"
	"github.com/fusescope/fusescope/internal/profile"
	"github.com/fusescope/fusescope/internal/sysevent"
)

// NoServer: no server could take the run (none listens, it traces
// another run, or it is another build), and why; the client loads its own
// programs.
type NoServer struct {
	Why  string
	Busy bool // a server answered, but traces another run
}

func (e NoServer) Error() string { return e.Why }

// Client is a run on a server's programs: the kernel side of a live run
// (syslive.LiveSource), as a ktrace.SyscallTracer is for one that loads
// its own.
type Client struct {
	conn      net.Conn
	enc       *gob.Encoder
	dec       *gob.Decoder
	reply     serveReply
	socket    string
	setup     time.Duration
	ended     time.Time
	windowEnd float64
}

// Dial asks the server on socket to start a run with opts. It returns a
// NoServer error when the client should load the programs itself, and
// why.
func Dial(socket, tool string, opts ktrace.SyscallOptions) (*Client, error) {
	start := time.Now()
	conn, err := net.Dial("unix", socket)
	if err != nil {
		return nil, NoServer{Why: err.Error()}
	}
	// Anyone may listen on a --socket in a directory others can write:
	// the run's options, and the command it holds, go only to root or to
	// this user.
	if err := checkServerCred(conn.(*net.UnixConn), socket); err != nil {
		conn.Close()
		return nil, err
	}
	r := &Client{conn: conn, enc: gob.NewEncoder(conn), dec: gob.NewDecoder(conn), socket: socket}
	opts.Category = nil
	if err := r.enc.Encode(serveRequest{Protocol: serveProtocol, Tool: tool, PID: os.Getpid(), Options: opts}); err != nil {
		conn.Close()
		return nil, NoServer{Why: fmt.Sprintf("sending to the server: %v", err)}
	}
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if err := r.dec.Decode(&r.reply); err != nil {
		conn.Close()
		return nil, NoServer{Why: fmt.Sprintf("the server did not answer: %v", err)}
	}
	conn.SetReadDeadline(time.Time{})
	if r.reply.Err != "" {
		conn.Close()
		if r.reply.Busy || r.reply.Mismatch {
			return nil, NoServer{Why: r.reply.Err, Busy: r.reply.Busy}
		}
		return nil, fmt.Errorf("the server on %s: %s", socket, r.reply.Err)
	}
	r.setup = time.Since(start)
	return r, nil
}

// checkServerCred refuses a server that runs neither as root nor as this
// process's user, before anything is sent to it.
func checkServerCred(conn *net.UnixConn, socket string) error {
	cred, err := peerCred(conn)
	if err != nil {
		return fmt.Errorf("the server on %s: its credentials cannot be read (%v): nothing was sent to it", socket, err)
	}
	if me := os.Geteuid(); cred.Uid != 0 && int(cred.Uid) != me {
		return option.Errorf("the server on %s runs as uid %d, neither root nor you (uid %d): nothing was sent to it; stop it, or give another {socket} or {no-server}", socket, cred.Uid, me)
	}
	return nil
}

func (r *Client) Root() int                  { return r.reply.Root }
func (r *Client) Running() map[int]string    { return r.reply.Running }
func (r *Client) Began() time.Time           { return r.reply.Began }
func (r *Client) Ended() time.Time           { return r.ended }
func (r *Client) Window() (float64, float64) { return r.reply.WindowStart, r.windowEnd }

// SetOrigin asks the server to make now the run's time 0, and waits until
// it has: the command is released only then.
func (r *Client) SetOrigin() error {
	if err := r.enc.Encode(clientMessage{Release: true}); err != nil {
		return fmt.Errorf("the server on %s: %w", r.socket, err)
	}
	var m serveMessage
	r.conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	defer r.conn.SetReadDeadline(time.Time{})
	if err := r.dec.Decode(&m); err != nil || m.Origin == nil {
		return fmt.Errorf("the server on %s did not start the run's clock: %v", r.socket, err)
	}
	if m.Origin.Err != "" {
		return fmt.Errorf("the server on %s: %s", r.socket, m.Origin.Err)
	}
	r.reply.WindowStart = m.Origin.WindowStart
	return nil
}

// Run passes the server's events to emit until stop is closed and the
// server has sent the run's end.
func (r *Client) Run(stop <-chan struct{}, emit func(*sysevent.Event), info *profile.LiveInfo) error {
	go func() {
		<-stop
		r.enc.Encode(clientMessage{Stop: true})
	}()
	for {
		var m serveMessage
		if err := r.dec.Decode(&m); err != nil {
			return fmt.Errorf("the server on %s ended the run: %w", r.socket, err)
		}
		if m.Event != nil {
			emit(m.Event)
		}
		if end := m.End; end != nil {
			*info = end.Info
			info.SetupS = r.setup.Seconds() // as the client waited for it
			info.LoadedBy = fmt.Sprintf("fusescope syscalls --serve, pid %d, on %s", r.reply.PID, r.socket)
			r.ended, r.windowEnd = end.Ended, end.WindowEnd
			if end.Err != "" {
				return fmt.Errorf("the server on %s: %s", r.socket, end.Err)
			}
			return nil
		}
	}
}

func (r *Client) Close() error { return r.conn.Close() }
