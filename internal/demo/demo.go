package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/replayguard/replayguard/web"
)

// Defaults of Options.
const (
	DefaultListen = "127.0.0.1:9780"
	DefaultPace   = 700 * time.Millisecond
)

// Client ids of the naive consumer's and the dispatch board's persistent
// sessions (replayguard's is configYAML's mqtt.client_id), and what the
// naive consumer subscribes to.
const (
	naiveClientID = "demo-naive-console"
	boardClientID = "demo-dispatch-board"
	feedFilter    = "incidents/#"
)

// stepTimeout bounds each wait for something the story needs to happen.
const stepTimeout = 15 * time.Second

// Options tune Run. The zero value runs the demo at its normal pace.
type Options struct {
	// Listen is the dashboard's address. It must be loopback; when its
	// port is taken, a free one is used. Default DefaultListen.
	Listen string
	// Hold keeps the dashboard up this long after the story, for a person
	// to look; Run returns earlier if ctx is done. Default 0.
	Hold time.Duration
	// Pace is the pause between the story's steps. Default DefaultPace:
	// about ten seconds in all.
	Pace time.Duration
	// Report is where the after-action report of replayguard's store
	// (internal/report, HTML) is written at the end, and the narration says
	// where; a report that cannot be written is said so and changes
	// nothing else. Default "": none.
	Report string
	// Version is shown on the dashboard. Default "dev".
	Version string
	// Logger receives the components' logs: replayguard's consumer, engine
	// and store, the dashboard, the brokers' errors. The consumer warns of
	// every failed reconnection, which the story causes on purpose: the
	// narration on stdout already tells them, so a logger at error level
	// keeps a terminal clean. Default nil: discard.
	Logger *slog.Logger
}

func (o *Options) setDefaults() error {
	if o.Listen == "" {
		o.Listen = DefaultListen
	}
	if o.Pace == 0 {
		o.Pace = DefaultPace
	}
	if o.Version == "" {
		o.Version = "dev"
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Pace < 0 || o.Hold < 0 {
		return fmt.Errorf("%w: negative pace or hold", ErrOptions)
	}
	host, _, err := net.SplitHostPort(o.Listen)
	if err != nil {
		return fmt.Errorf("%w: listen %q: %v", ErrOptions, o.Listen, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("%w: listen %q: the demo serves loopback only", ErrOptions, o.Listen)
	}
	return nil
}

// Run plays the failover story on embedded brokers, narrating it on
// stdout, and prints the naive consumer's picture next to replayguard's
// and the dispatch board's, which it built from replayguard's clean
// stream. It returns nil when replayguard's and the board's pictures are
// exact and the naive one is wrong, which proves the standby really
// replayed applied reports. It
// returns once everything it started has stopped and its temporary
// directories are gone.
func Run(ctx context.Context, stdout io.Writer, opts Options) error {
	_, err := run(ctx, stdout, opts)
	return err
}

// result is what the story ended with.
type result struct {
	naive, guard, board, truth picture
	rows                       []row
	duplicates, dupZero        int // replayguard's duplicate decisions, and those with DUP=0
	naiveReplays               int // replays the naive consumer applied again
	applied                    int // reports replayguard applied (applied, applied_late)
	forwarded                  int // copies the COP broker acknowledged to replayguard's outbox
	clean                      cleanCounts
}

// cleanCounts are the copies the dispatch board received on the clean
// stream: every copy, and each outcome of keying on replayguard-key.
type cleanCounts struct {
	copies, keys, repeats, unkeyed, invalid int
}

func run(ctx context.Context, stdout io.Writer, opts Options) (*result, error) {
	if err := opts.setDefaults(); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "replayguard-demo-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	d := &demo{opts: opts, log: opts.Logger, dir: dir, story: newStory(),
		out: &narrator{w: stdout, start: time.Now()}, naiveT: newTally(), guardT: newTally(), boardT: newTally()}
	defer d.shutdown()
	if err := d.setUp(ctx); err != nil {
		return nil, err
	}
	if err := d.play(ctx); err != nil {
		return nil, err
	}
	d.stopFeed()
	res := d.conclude()
	d.writeReport(ctx)
	d.hold(ctx)
	return res, res.verdict()
}

// demo is one run of the story and everything it started.
type demo struct {
	opts  Options
	log   *slog.Logger
	dir   string
	story story
	out   *narrator

	primary, standby       *broker
	cop                    *broker // the dispatch centre's broker: the clean stream
	links                  []*link // the consumers' network: to the primary, to the standby
	naive                  *naive
	guard                  *guard
	board                  *board
	naiveT, guardT, boardT *tally

	webURL  string
	stopWeb context.CancelFunc
	webDone chan error
}

// setUp starts the primary broker, the consumers' links to both brokers
// and the COP broker, opens replayguard and serves the dashboard.
func (d *demo) setUp(ctx context.Context) error {
	var err error
	if d.primary, err = d.startBroker("primary"); err != nil {
		return err
	}
	if d.cop, err = d.startBroker("cop"); err != nil {
		return err
	}
	for range 2 {
		l, err := newLink()
		if err != nil {
			return err
		}
		d.links = append(d.links, l)
	}
	d.links[0].connect(d.primary.addr)
	brokers := []string{d.links[0].URL(), d.links[1].URL()}
	retry := min(d.opts.Pace/4, 100*time.Millisecond) + 10*time.Millisecond
	d.naive = newNaive(subscriberConfig{name: "naive consumer", brokers: brokers, clientID: naiveClientID, filter: feedFilter,
		retry: retry, log: d.log}, d.naiveT)
	d.board = newBoard(subscriberConfig{name: "dispatch board", brokers: []string{d.cop.URL()}, clientID: boardClientID,
		filter: cleanFilter, retry: retry, log: d.log}, d.boardT)
	d.guard, err = openGuard(ctx, guardConfig{dir: filepath.Join(d.dir, "replayguard"), brokers: brokers, cop: d.cop.URL(),
		version: d.opts.Version, retry: retry, log: d.log}, d.guardT)
	if err != nil {
		return err
	}
	if err := d.serveDashboard(); err != nil {
		return err
	}
	d.out.plain("replayguard demo: a structure fire, a broker failover, and a standby that replays what was already applied\n")
	d.out.plain("  dashboard        %s", d.webURL)
	d.out.plain("  primary broker   %s   mochi-mqtt, sessions in a bbolt file written synchronously", d.primary.URL())
	d.out.plain("  standby broker   started at failover from the primary's last checkpoint")
	d.out.plain("  consumers        %q applies every delivery, %q is replayguard;", naiveClientID, d.guard.clientID())
	d.out.plain("                   both reach the brokers over the dispatch link: %s, %s", brokers[0], brokers[1])
	d.out.plain("  COP broker       %s   the dispatch centre's own, outside the failover: the outbox is done with", d.cop.URL())
	d.out.plain("                   a copy at its PUBACK, and a standby promoted from a stale checkpoint could lose a")
	d.out.plain("                   copy it had PUBACKed, which no outbox would send again")
	d.out.plain("  clean stream     replayguard's outbox forwards each report it applies to clean/<topic> on the COP broker;")
	d.out.plain("                   %q subscribes to %s and, auto-acking like the naive console,", boardClientID, cleanFilter)
	d.out.plain("                   applies the first copy of each replayguard-key\n")
	return nil
}

// startBroker starts an embedded broker on a free loopback port, its
// sessions in a directory of its own.
func (d *demo) startBroker(name string) (*broker, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	return startBroker(name, ln, filepath.Join(d.dir, name), brokerLog(d.log))
}

// serveDashboard serves the web package on the loopback address asked for,
// or on a free port when that one is taken.
func (d *demo) serveDashboard() error {
	ln, err := listenDashboard(d.opts.Listen)
	if err != nil {
		return err
	}
	g := d.guard
	srv := web.New(web.Config{Listen: ln.Addr().String(), Version: d.opts.Version, Logger: d.log},
		web.Deps{Engine: g.eng, Audit: g.store, Quarantine: g.store, Gatherer: g.reg, Ready: g.ready, Hub: g.hub, Store: g.storeStatus,
			Outbox: g.eng, Forward: g.app.ForwardStatus()})
	ctx, cancel := context.WithCancel(context.Background())
	d.stopWeb, d.webDone = cancel, make(chan error, 1)
	go func() { d.webDone <- srv.Serve(ctx, ln) }()
	d.webURL = "http://" + ln.Addr().String() + "/"
	return nil
}

// listenDashboard listens on addr, or on a free port of the same host when
// addr's port is taken.
func listenDashboard(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if errors.Is(err, syscall.EADDRINUSE) {
		host, _, _ := net.SplitHostPort(addr)
		ln, err = net.Listen("tcp", net.JoinHostPort(host, "0"))
	}
	if err != nil {
		return nil, fmt.Errorf("dashboard: %w", err)
	}
	return ln, nil
}

// play runs the story's acts.
func (d *demo) play(ctx context.Context) error {
	for _, act := range []func(context.Context) error{d.subscribe, d.holdReports, d.checkpoint, d.deliver, d.failOver, d.continueOnStandby} {
		if err := act(ctx); err != nil {
			return err
		}
	}
	return nil
}

// subscribe creates both consumers' persistent sessions on the primary,
// and the dispatch board's on the COP broker.
func (d *demo) subscribe(ctx context.Context) error {
	if err := d.startConsumers(); err != nil {
		return err
	}
	if err := d.waitOn(ctx, d.links[0].URL(), "subscribe on the primary"); err != nil {
		return err
	}
	if err := d.wait(ctx, "the dispatch board to subscribe on the COP broker", func() bool { return d.boardT.on(d.cop.URL()) }); err != nil {
		return err
	}
	d.out.say("both consumers subscribed to %s on the primary, the dispatch board to %s on the COP broker, QoS 1", feedFilter, cleanFilter)
	d.out.more("persistent sessions: MQTT 5, clean start off, session expiry 1h")
	return d.pause(ctx)
}

// holdReports publishes the first reports while the consumers are cut off:
// the primary keeps them in their sessions.
func (d *demo) holdReports(ctx context.Context) error {
	d.links[0].cut()
	d.out.say("dispatch link down: both consumers cut off; the primary keeps their reports in their sessions")
	if err := d.pause(ctx); err != nil {
		return err
	}
	return d.publish(ctx, d.primary, d.story.held, "")
}

// checkpoint copies the primary's session store for the standby while it
// holds the reports unacknowledged.
func (d *demo) checkpoint(ctx context.Context) error {
	if err := d.wait(ctx, "the primary to see every client gone", func() bool { return d.primary.connected() == 0 }); err != nil {
		return err
	}
	copyDir := filepath.Join(d.dir, "standby")
	if err := d.primary.checkpoint(copyDir); err != nil {
		return err
	}
	held, err := inflightBySession(copyDir)
	if err != nil {
		return err
	}
	d.out.say("primary checkpoint: it stops a moment, its session store is copied for the standby, it restarts")
	d.out.more("the copy holds %s unacknowledged in the naive consumer's session, %d in replayguard's",
		plural(held[naiveClientID], "report"), held[d.guard.clientID()])
	return d.pause(ctx)
}

// deliver restores the link: the consumers apply and acknowledge the held
// reports, then the story goes on.
func (d *demo) deliver(ctx context.Context) error {
	d.links[0].connect(d.primary.addr)
	if err := d.waitHandled(ctx, d.story.held, "the held reports to reach both consumers"); err != nil {
		return err
	}
	n, g := d.naiveT.from(d.links[0].URL()), d.guardT.from(d.links[0].URL())
	d.out.say("dispatch link up: both consumers get the %s held, apply and acknowledge them", plural(len(d.story.held), "report"))
	d.out.more("DUP=1 on %d (naive) and %d (replayguard) of them, though none was delivered before", n.firstDup, g.firstDup)
	if err := d.waitClean(ctx, d.story.held, "the held reports to reach the dispatch board"); err != nil {
		return err
	}
	c := d.cleanCounts()
	d.out.say("clean stream: replayguard's outbox forwards the %s after their commit; the dispatch board receives %s of %d keys, applies %d",
		plural(len(d.story.held), "report"), copies(c.copies), c.keys, c.keys)
	if s := d.board.first(); s != nil {
		d.out.more("a copy is the report's own bytes on %s, with MQTT 5 user properties", s.topic)
		d.out.more("%s", describeProperties(s.user))
	}
	if err := d.pause(ctx); err != nil {
		return err
	}
	if err := d.publish(ctx, d.primary, d.story.live, ""); err != nil {
		return err
	}
	if err := d.waitHandled(ctx, d.story.live, "the reports to reach both consumers"); err != nil {
		return err
	}
	if err := d.guard.drainForward(ctx); err != nil {
		return err
	}
	return d.waitClean(ctx, d.story.live, "the reports to reach the dispatch board")
}

// failOver crashes the primary and promotes the standby from the
// checkpoint, which predates the consumers' acknowledgements.
func (d *demo) failOver(ctx context.Context) error {
	before := d.cleanCounts()
	d.primary.fail()
	d.out.say("the primary fails: listener and connections cut, no DISCONNECT")
	if err := d.pause(ctx); err != nil {
		return err
	}
	var err error
	if d.standby, err = d.startBroker("standby"); err != nil { // on the checkpoint's copy
		return err
	}
	d.links[1].connect(d.standby.addr)
	d.out.say("standby promoted at %s from the checkpoint; the consumers fail over to it", d.standby.URL())
	d.out.more("its sessions still hold reports the consumers have applied and acknowledged since")
	standby := d.links[1].URL()
	if err := d.waitOn(ctx, standby, "reconnect to the standby"); err != nil {
		return err
	}
	if err := d.waitQuiet(ctx); err != nil {
		return err
	}
	n, g := d.naiveT.from(standby), d.guardT.from(standby)
	d.out.say("naive consumer: the standby resends %s (%d with DUP=1), %d already applied: applied again",
		plural(n.deliveries, "report"), n.dup, n.replays)
	dups, _ := d.guardT.outcome("duplicate")
	d.out.say("replayguard:    the standby resends %s (%d with DUP=1), %d already applied: %d duplicate, none applied again",
		plural(g.deliveries, "report"), g.dup, g.replays, dups)
	if err := d.guard.drainForward(ctx); err != nil {
		return err
	}
	if err := d.waitQuietClean(ctx); err != nil {
		return err
	}
	d.sayCleanSince(before)
	return d.pause(ctx)
}

// continueOnStandby publishes the rest of the story on the standby.
func (d *demo) continueOnStandby(ctx context.Context) error {
	if err := d.publish(ctx, d.standby, d.story.after, "  (on the standby)"); err != nil {
		return err
	}
	if err := d.waitHandled(ctx, d.story.after, "the last report to reach both consumers"); err != nil {
		return err
	}
	if err := d.waitQuiet(ctx); err != nil {
		return err
	}
	if err := d.guard.drainForward(ctx); err != nil {
		return err
	}
	if err := d.waitClean(ctx, d.story.after, "the last report to reach the dispatch board"); err != nil {
		return err
	}
	if err := d.waitQuietClean(ctx); err != nil {
		return err
	}
	d.out.say("story over")
	return nil
}
