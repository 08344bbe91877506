package demo

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	mochi "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/hooks/auth"
	"github.com/mochi-mqtt/server/v2/listeners"
)

// listenerID names the brokers' one listener. Restored sessions remember
// the listener they came through, so primary and standby use the same id.
const listenerID = "tcp"

// broker is an embedded mochi-mqtt server on a fixed loopback address,
// keeping its sessions (clients, subscriptions, in-flight messages with
// their packet ids) in a sessionStore in dir, written synchronously, so
// that a broker started on dir resends what was unacknowledged.
type broker struct {
	name string
	dir  string
	addr string
	log  *slog.Logger

	mu    sync.Mutex
	srv   *mochi.Server
	conns *trackedListener
}

// startBroker serves ln with a session store in dir, restoring whatever the
// store holds.
func startBroker(name string, ln net.Listener, dir string, log *slog.Logger) (*broker, error) {
	b := &broker{name: name, dir: dir, addr: ln.Addr().String(), log: log.With("broker", name)}
	if err := b.serve(ln); err != nil {
		return nil, err
	}
	return b, nil
}

// URL is the broker's address as MQTT clients name it.
func (b *broker) URL() string { return "tcp://" + b.addr }

func (b *broker) serve(ln net.Listener) error {
	srv := mochi.New(&mochi.Options{Logger: b.log})
	if err := srv.AddHook(new(auth.AllowHook), nil); err != nil {
		ln.Close()
		return fmt.Errorf("%s broker: %w", b.name, err)
	}
	if err := srv.AddHook(new(sessionStore), &sessionStoreOptions{Dir: b.dir}); err != nil {
		ln.Close()
		return fmt.Errorf("%s broker: open session store: %w", b.name, err)
	}
	tl := &trackedListener{Listener: ln, conns: map[net.Conn]struct{}{}}
	if err := srv.AddListener(listeners.NewNet(listenerID, tl)); err != nil {
		srv.Close()
		ln.Close()
		return fmt.Errorf("%s broker: %w", b.name, err)
	}
	if err := srv.Serve(); err != nil {
		srv.Close()
		return fmt.Errorf("%s broker: %w", b.name, err)
	}
	b.mu.Lock()
	b.srv, b.conns = srv, tl
	b.mu.Unlock()
	return nil
}

// online reports whether any of the clients is connected right now.
func (b *broker) online(clientIDs ...string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.srv == nil {
		return false
	}
	for _, id := range clientIDs {
		if cl, ok := b.srv.Clients.Get(id); ok && !cl.Closed() {
			return true
		}
	}
	return false
}

// inflight is how many messages the broker holds unacknowledged in a
// client's session.
func (b *broker) inflight(clientID string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.srv == nil {
		return 0
	}
	if cl, ok := b.srv.Clients.Get(clientID); ok {
		return cl.State.Inflight.Len()
	}
	return 0
}

// close stops the broker cleanly: connected clients get a DISCONNECT, the
// store is flushed and closed. Its sessions stay in dir.
func (b *broker) close() {
	b.mu.Lock()
	srv := b.srv
	b.srv = nil
	b.mu.Unlock()
	if srv != nil {
		srv.Close() // waits for every client goroutine, then closes the store
	}
}

// fail stops the broker the way a crash does: the listener and every
// connection close at once, no DISCONNECT is sent. The store is then closed
// once the server has noticed its clients are gone.
func (b *broker) fail() {
	b.mu.Lock()
	tl := b.conns
	b.mu.Unlock()
	if tl != nil {
		tl.Close()
		tl.dropAll()
	}
	b.close()
}

// checkpoint takes a consistent copy of the broker's session store into
// dst: the broker stops cleanly for a moment, its directory is copied, and
// it starts again on the same address and directory, restoring its
// sessions from it as the standby will from the copy. Clients connected at that moment are disconnected;
// the demo takes it while no consumer is.
func (b *broker) checkpoint(dst string) error {
	b.close()
	if err := copyDir(b.dir, dst); err != nil {
		return fmt.Errorf("%s broker: checkpoint: %w", b.name, err)
	}
	ln, err := listenAgain(b.addr)
	if err != nil {
		return fmt.Errorf("%s broker: restart: %w", b.name, err)
	}
	return b.serve(ln)
}

// listenAgain listens on addr, which a listener just closed: the port is
// free, but give the kernel a moment if it is not yet.
func listenAgain(addr string) (net.Listener, error) {
	var err error
	for range 50 {
		var ln net.Listener
		if ln, err = net.Listen("tcp", addr); err == nil {
			return ln, nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil, err
}

// copyDir copies the regular files of the directory tree src into dst.
func copyDir(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(to, 0o700)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		return copyFile(path, to)
	})
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// trackedListener remembers the connections it accepted, so that a
// simulated crash can cut them all at once.
type trackedListener struct {
	net.Listener
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
}

func (l *trackedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		c.Close()
		return nil, net.ErrClosed
	}
	tc := &trackedConn{Conn: c, l: l}
	l.conns[tc] = struct{}{}
	return tc, nil
}

func (l *trackedListener) Close() error {
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	err := l.Listener.Close()
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

// dropAll closes every accepted connection that is still open.
func (l *trackedListener) dropAll() {
	l.mu.Lock()
	conns := make([]net.Conn, 0, len(l.conns))
	for c := range l.conns {
		conns = append(conns, c)
	}
	l.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}

type trackedConn struct {
	net.Conn
	l    *trackedListener
	once sync.Once
}

func (c *trackedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.l.mu.Lock()
		delete(c.l.conns, c)
		c.l.mu.Unlock()
	})
	return err
}
