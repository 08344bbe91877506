package testbroker

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"
)

// RESPError is an error reply from Redis, such as "LOADING …" or "ERR …".
type RESPError string

func (e RESPError) Error() string { return string(e) }

// respConn is just enough of a Redis client for the helpers and their
// tests: one command at a time, RESP2 replies.
type respConn struct {
	c net.Conn
	r *bufio.Reader
}

func dialRESP(addr string, timeout time.Duration) (*respConn, error) {
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return nil, err
	}
	if err := c.SetDeadline(time.Now().Add(timeout)); err != nil {
		_ = c.Close()
		return nil, err
	}
	return &respConn{c: c, r: bufio.NewReader(c)}, nil
}

func (c *respConn) Close() error { return c.c.Close() }

// Do sends args as one command and reads its reply. An error reply is
// returned as a RESPError error; inside an array it is an element.
func (c *respConn) Do(args ...string) (any, error) {
	b := fmt.Appendf(nil, "*%d\r\n", len(args))
	for _, a := range args {
		b = fmt.Appendf(b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := c.c.Write(b); err != nil {
		return nil, err
	}
	v, err := c.read()
	if e, ok := v.(RESPError); ok && err == nil {
		return nil, e
	}
	return v, err
}

func (c *respConn) read() (any, error) {
	line, err := c.r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	if len(line) < 3 || line[len(line)-2] != '\r' {
		return nil, fmt.Errorf("resp: malformed line %q", line)
	}
	kind, body := line[0], line[1:len(line)-2]
	switch kind {
	case '+':
		return body, nil
	case '-':
		return RESPError(body), nil
	case ':':
		return strconv.ParseInt(body, 10, 64)
	case '$':
		return c.readBulk(body)
	case '*':
		return c.readArray(body)
	}
	return nil, fmt.Errorf("resp: unknown reply type %q", kind)
}

func (c *respConn) readBulk(size string) (any, error) {
	n, err := strconv.Atoi(size)
	if err != nil || n < 0 {
		return nil, err // $-1: nil
	}
	b := make([]byte, n+2)
	if _, err := io.ReadFull(c.r, b); err != nil {
		return nil, err
	}
	return string(b[:n]), nil
}

func (c *respConn) readArray(size string) (any, error) {
	n, err := strconv.Atoi(size)
	if err != nil || n < 0 {
		return nil, err // *-1: nil
	}
	a := make([]any, n)
	for i := range a {
		if a[i], err = c.read(); err != nil {
			return nil, err
		}
	}
	return a, nil
}
