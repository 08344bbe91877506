package testbroker

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// NATSEnv names an environment variable that, when set, is the path of the
// nats-server binary to run instead of the one found on PATH.
const NATSEnv = "REPLAYGUARD_NATS_SERVER"

// NATSOptions configures a nats-server process. The zero value runs
// JetStream with its store in the server's directory.
type NATSOptions struct {
	// Port to listen on, on 127.0.0.1. Zero picks a free port.
	Port int
	// Dir holds the JetStream store. Empty means a new temporary directory
	// removed at cleanup.
	Dir string
	// Extra command-line arguments, appended as they are.
	Extra []string
	// MQTT opens an MQTT listener on another free loopback port (NATS 2.9
	// speaks MQTT 3.1.1 only; it needs JetStream and a server name, both
	// set). Its sessions and QoS 1 messages live in the JetStream store, so
	// they survive a restart.
	MQTT bool
	// MQTTAckWait is mqtt.ack_wait, how long the server waits for a PUBACK
	// before it sends the message again. Zero: the server's 30s.
	MQTTAckWait time.Duration
	// MQTTMaxAckPending is mqtt.max_ack_pending, the QoS 1 messages in
	// flight per subscription. Zero: the server's 1024.
	MQTTMaxAckPending int
}

// NATS is a nats-server with JetStream running as a child process on a
// loopback port. Its methods are meant for the test goroutine; they fail the
// test on error. The process is killed at cleanup, and its log is printed
// when the test has failed.
type NATS struct {
	tb   testing.TB
	bin  string
	opts NATSOptions
	port int
	dir  string
	log  *SyncBuffer
	proc *child

	mqttPort int // 0 without an MQTT listener
}

// NATSPath returns the nats-server binary to run. When there is none, it
// skips the test, or fails it when REPLAYGUARD_REQUIRE_SERVICES=1.
func NATSPath(tb testing.TB) string {
	tb.Helper()
	return binary(tb, NATSEnv, "nats-server", "/usr/sbin/nats-server", "/usr/bin/nats-server", "/usr/local/bin/nats-server")
}

// StartNATS starts a nats-server with JetStream and waits until it is ready
// for clients.
func StartNATS(tb testing.TB, opts NATSOptions) *NATS {
	tb.Helper()
	n := &NATS{tb: tb, bin: NATSPath(tb), opts: opts, dir: opts.Dir, log: &SyncBuffer{}}
	if n.dir == "" {
		n.dir = tb.TempDir()
	}
	tb.Cleanup(n.cleanup)
	if opts.Port != 0 {
		n.port = opts.Port
		n.start()
		return n
	}
	startOnFreePort(tb, "nats-server", func(port int) error { n.port = port; return n.tryStart() }, n.Log)
	return n
}

// URL is the server's client URL: nats://127.0.0.1:PORT.
func (n *NATS) URL() string { return "nats://" + n.Addr() }

// Addr is the server's host:port.
func (n *NATS) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(n.port)) }

// MQTTURL is the MQTT listener's address for MQTT clients:
// tcp://127.0.0.1:PORT. It is empty without NATSOptions.MQTT.
func (n *NATS) MQTTURL() string {
	if n.mqttPort == 0 {
		return ""
	}
	return "tcp://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(n.mqttPort))
}

// Dir is the directory holding the JetStream store (and the configuration).
func (n *NATS) Dir() string { return n.dir }

// Log returns what the server has logged, over all restarts.
func (n *NATS) Log() string { return n.log.String() }

// Running reports whether the server process is alive.
func (n *NATS) Running() bool { return n.proc.running() }

// CPU is the processor time the running server has used so far, user and
// system, in steps of 10 ms (Linux); 0 when it is not running.
func (n *NATS) CPU() time.Duration {
	if !n.proc.running() {
		return 0
	}
	return procCPU(n.proc.pid())
}

// Kill ends the server with SIGKILL.
func (n *NATS) Kill() { n.tb.Helper(); n.proc.signalAndWait(syscall.SIGKILL) }

// Stop ends the server with SIGTERM and waits for it to exit.
func (n *NATS) Stop() { n.tb.Helper(); n.proc.signalAndWait(syscall.SIGTERM) }

// Restart starts the server again on the same port and JetStream store. A
// running server is stopped with SIGTERM first.
func (n *NATS) Restart() {
	n.tb.Helper()
	if n.Running() {
		n.Stop()
	}
	n.log.WriteString("--- testbroker: restart ---\n")
	n.start()
}

func (n *NATS) start() {
	n.tb.Helper()
	if err := n.tryStart(); err != nil {
		n.tb.Fatalf("testbroker: start nats-server on port %d: %v\n%s", n.port, err, n.Log())
	}
}

func (n *NATS) tryStart() error {
	args := []string{"-a", "127.0.0.1", "-p", strconv.Itoa(n.port), "-js", "-sd", filepath.Join(n.dir, "jetstream")}
	if n.opts.MQTT {
		conf, err := n.mqttConfig()
		if err != nil {
			return err
		}
		args = append(args, "-c", conf)
	}
	cmd := exec.Command(n.bin, append(args, n.opts.Extra...)...)
	mark := n.log.Len()
	cmd.Stdout, cmd.Stderr = n.log, n.log
	p, err := startChild(cmd)
	if err != nil {
		return err
	}
	n.proc = p
	deadline := time.Now().Add(startTimeout)
	for time.Now().Before(deadline) {
		if !p.running() {
			return fmt.Errorf("nats-server exited at start")
		}
		// This process says it is ready, not another one on the port.
		if strings.Contains(n.log.String()[mark:], "Server is ready") && n.accepts() {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	p.signalAndWait(syscall.SIGKILL)
	return fmt.Errorf("nats-server not ready after %v", startTimeout)
}

// accepts reports whether the client port, and the MQTT port if any,
// accept connections.
func (n *NATS) accepts() bool {
	addrs := []string{n.Addr()}
	if n.mqttPort != 0 {
		addrs = append(addrs, strings.TrimPrefix(n.MQTTURL(), "tcp://"))
	}
	for _, a := range addrs {
		c, err := net.DialTimeout("tcp", a, 200*time.Millisecond)
		if err != nil {
			return false
		}
		c.Close()
	}
	return true
}

// mqttConfig writes the configuration file of the MQTT listener, on the
// port chosen at the first start and kept over restarts.
func (n *NATS) mqttConfig() (string, error) {
	if n.mqttPort == 0 {
		n.mqttPort = FreePort(n.tb)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "server_name: replayguard-test-%d\nmqtt {\n  listen: \"127.0.0.1:%d\"\n", n.port, n.mqttPort)
	if n.opts.MQTTAckWait > 0 {
		fmt.Fprintf(&b, "  ack_wait: \"%s\"\n", n.opts.MQTTAckWait)
	}
	if n.opts.MQTTMaxAckPending > 0 {
		fmt.Fprintf(&b, "  max_ack_pending: %d\n", n.opts.MQTTMaxAckPending)
	}
	b.WriteString("}\n")
	conf := filepath.Join(n.dir, "nats.conf")
	return conf, os.WriteFile(conf, []byte(b.String()), 0o600)
}

func (n *NATS) cleanup() {
	n.proc.signalAndWait(syscall.SIGKILL)
	if n.tb.Failed() {
		n.tb.Logf("testbroker: nats-server on port %d (dir %s) logged:\n%s", n.port, n.dir, tail(n.Log(), 64<<10))
	}
}
