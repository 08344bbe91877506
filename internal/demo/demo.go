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
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/web"
)

// Defaults of Options.
const (
	DefaultListen = "127.0.0.1:9780"
	DefaultPace   = 700 * time.Millisecond
)

// Client ids of the naive consumer's and the dispatch board's persistent
// sessions (replayguard's is the story configuration's mqtt.client_id).
const (
	naiveClientID = "demo-naive-console"
	boardClientID = "demo-dispatch-board"
)

// stepTimeout bounds each wait for something the story needs to happen.
const stepTimeout = 15 * time.Second

// Options tune Run. The zero value runs the incident story at its normal
// pace.
type Options struct {
	// Story is the story told: StoryIncident, StoryPlant or
	// StoryRedundant (see Stories).
	// Default StoryIncident.
	Story string
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
	if o.Story == "" {
		o.Story = StoryIncident
	}
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
	if !slices.Contains(Stories, o.Story) {
		return fmt.Errorf("%w: story %q: the stories are %s", ErrOptions, o.Story, storyNames())
	}
	switch {
	case o.Pace < 0:
		return fmt.Errorf("%w: --pace %v is negative", ErrOptions, o.Pace)
	case o.Hold < 0:
		return fmt.Errorf("%w: --hold %v is negative", ErrOptions, o.Hold)
	}
	host, port, err := net.SplitHostPort(o.Listen)
	if err != nil {
		return fmt.Errorf("%w: --listen %q: %v", ErrOptions, o.Listen, err)
	}
	if n, err := strconv.Atoi(port); port != "" && (err != nil || n < 0 || n > 65535) {
		return fmt.Errorf("%w: --listen %q: port %q is not from 0 to 65535", ErrOptions, o.Listen, port)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("%w: --listen %q: the demo serves loopback only", ErrOptions, o.Listen)
	}
	return nil
}

// Run plays a failover story on embedded brokers, narrating it on stdout,
// and prints the naive consumer's picture next to replayguard's (and, in
// the incident story, the dispatch board's, which it built from
// replayguard's clean stream) and the truth. It returns nil when
// replayguard's pictures are exact, its audit chain verifies and the naive
// picture is wrong, which proves the standby really replayed applied
// messages. It returns once everything it started has stopped and its
// temporary directories are gone.
func Run(ctx context.Context, stdout io.Writer, opts Options) error {
	_, err := run(ctx, stdout, opts)
	return err
}

// result is what the story ended with.
type result struct {
	clean                      bool // the story has the clean stream and its board
	naive, guard, board, truth picture
	rows                       []row
	duplicates, dupZero        int // replayguard's duplicate decisions, and those with DUP=0
	naiveReplays               int // replays the naive consumer applied again
	applied                    int // messages replayguard applied (applied, applied_late)
	forwarded                  int // copies the COP broker acknowledged to replayguard's outbox
	cleanCounts                cleanCounts
	audited                    uint64 // audit records verified
	auditErr                   error  // why the audit chain did not verify
	sources                    []engine.SourceReport
	// In a story on two paths: what each feed delivered, from replayguard's
	// audit records (or why they could not be read), and how soon the
	// reports published while path a was down were applied.
	paths       bool // the story runs on two paths
	feeds       map[string]feedCount
	feedsErr    error
	freshWithin time.Duration
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
	d := &demo{opts: opts, log: opts.Logger, dir: dir, story: newStoryNamed(opts.Story),
		out: &narrator{w: stdout, start: time.Now()}, naiveT: newTally(), guardT: newTally(), boardT: newTally()}
	defer d.shutdown()
	if err := d.setUp(ctx); err != nil {
		return nil, err
	}
	if err := d.play(ctx); err != nil {
		return nil, err
	}
	d.stopFeed()
	res := d.conclude(ctx)
	d.sayLineage(ctx)
	d.writeReport(ctx)
	d.hold(ctx)
	return res, res.verdict()
}

// demo is one run of the story and everything it started.
type demo struct {
	opts  Options
	log   *slog.Logger
	dir   string
	story *story
	out   *narrator

	primary, standby       *broker
	pathB                  *broker    // path b's broker, in a story on two paths; nil otherwise
	cop                    *broker    // the dispatch centre's broker, for the clean stream; nil without one
	links                  []*link    // the consumers' network: to the primary, to the standby
	producer               *publisher // the producer's connection a story keeps open (story.connected)
	naive                  *naive
	guard                  *guard
	board                  *board // nil without a clean stream
	naiveT, guardT, boardT *tally

	freshWithin time.Duration // set by publishWhileADown

	webURL  string
	stopWeb context.CancelFunc
	webDone chan error
}

// setUp starts the primary broker, the consumers' links to both brokers
// and, for a clean stream, the COP broker, opens replayguard and serves the
// dashboard.
func (d *demo) setUp(ctx context.Context) error {
	var err error
	if d.primary, err = d.startBroker("primary"); err != nil {
		return err
	}
	if d.story.clean {
		if d.cop, err = d.startBroker("cop"); err != nil {
			return err
		}
	}
	for range 2 {
		l, err := newLink()
		if err != nil {
			return err
		}
		d.links = append(d.links, l)
	}
	if d.story.paths { // path a's link comes up in the story (naiveOnPathB)
		if d.pathB, err = d.startBroker("path-b"); err != nil {
			return err
		}
		d.links[1].connect(d.pathB.addr)
	} else {
		d.links[0].connect(d.primary.addr)
	}
	brokers := []string{d.links[0].URL(), d.links[1].URL()}
	retry := min(d.opts.Pace/4, 100*time.Millisecond) + 10*time.Millisecond
	d.naive = newNaive(subscriberConfig{name: "naive consumer", brokers: brokers, clientID: naiveClientID, filter: d.story.filter,
		retry: retry, log: d.log}, d.naiveT, d.story)
	gc := guardConfig{yaml: d.story.config, dir: filepath.Join(d.dir, "replayguard"), brokers: brokers,
		version: d.opts.Version, retry: retry, log: d.log}
	if d.cop != nil {
		gc.cop = d.cop.URL()
		d.board = newBoard(subscriberConfig{name: "dispatch board", brokers: []string{d.cop.URL()}, clientID: boardClientID,
			filter: cleanFilter, retry: retry, log: d.log}, d.boardT, d.story)
	}
	if d.guard, err = openGuard(ctx, gc, d.guardT); err != nil {
		return err
	}
	if err := d.serveDashboard(); err != nil {
		return err
	}
	d.introduce(brokers)
	return nil
}

// introduce tells what the story runs on.
func (d *demo) introduce(brokers []string) {
	d.out.plain("%s\n", d.story.title)
	d.out.plain("  dashboard        %s", d.webURL)
	if d.story.paths {
		d.introducePaths(brokers)
		return
	}
	d.out.plain("  primary broker   %s   mochi-mqtt, sessions in a bbolt file written synchronously", d.primary.URL())
	d.out.plain("  standby broker   started at failover from the primary's last checkpoint")
	d.out.plain("  consumers        %q applies every delivery, %q is replayguard;", naiveClientID, d.guard.clientID())
	d.out.plain("                   both reach the brokers over the %s: %s, %s", d.story.link, brokers[0], brokers[1])
	if d.story.intro != nil {
		d.story.intro(d)
	}
	if d.cop == nil {
		d.out.plain("")
		return
	}
	d.out.plain("  COP broker       %s   the dispatch centre's own, outside the failover: the outbox is done with", d.cop.URL())
	d.out.plain("                   a copy at its PUBACK, and a standby promoted from a stale checkpoint could lose a")
	d.out.plain("                   copy it had PUBACKed, which no outbox would send again")
	d.out.plain("  clean stream     replayguard's outbox forwards each report it applies to clean/<topic> on the COP broker;")
	d.out.plain("                   %q subscribes to %s and, auto-acking like the naive console,", boardClientID, cleanFilter)
	d.out.plain("                   applies the first copy of each replayguard-key\n")
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
			Outbox: g.eng, Forward: g.app.ForwardStatus(), Feeds: g.feedStatus(), Explain: g.app.Explain})
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
