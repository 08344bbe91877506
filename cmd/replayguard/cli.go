package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/replayguard/replayguard/config"
	"github.com/replayguard/replayguard/internal/app"
)

// Exit codes.
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
)

// errUsage marks a command-line mistake: exit status 2 and the usage text.
// It is app's, so that a mistake app finds (a flag that does not fit the
// store) exits the same way.
var errUsage = app.ErrUsage

// EnvToken is the environment variable holding the bearer token a command
// sends to a running daemon's API (see app.Tool.Token).
const EnvToken = app.EnvToken

// env is what a command runs with.
type env struct {
	ctx     context.Context
	stdin   io.Reader
	stdout  io.Writer
	stderr  io.Writer
	log     *slog.Logger
	cfg     *config.Config
	cfgSrc  string // the file the config came from, or "(defaults)"
	cfgPath string // --config as given
	args    []string
	flags   *flag.FlagSet
}

type command struct {
	summary string
	usage   string                 // arguments after the verb
	flags   func(fs *flag.FlagSet) // extra flags; optional
	noCfg   bool                   // does not need a configuration
	args    bool                   // takes arguments after the verb (usage names them)
	run     func(e *env) error
}

var commands map[string]command

func init() {
	commands = map[string]command{
		"run":        {summary: "consume from MQTT (or a JetStream stream, input: jetstream) until SIGINT/SIGTERM, then drain and stop", run: cmdRun},
		"ingest":     {summary: "decide a captured feed (JSON Lines) and print a summary", usage: "FILE|- [--batch N] [--progress] [--drain-timeout D]", flags: ingestFlags, args: true, run: cmdIngest},
		"state":      {summary: "print entity state: every entity, or those whose names match a pattern (meter/m-4*)", usage: "[ENTITY|PATTERN]... [--json] [--token-name NAME]", flags: readFlags, args: true, run: cmdState},
		"sources":    {summary: "print per-source windows: epoch, high-water, open gaps", usage: "[--json] [--token-name NAME]", flags: readFlags, run: cmdSources},
		"audit":      {summary: "export the audit log (JSONL), verify its hash chain, or forget a removed sink's cursors", usage: "(export [--from N] | verify [--file F | --archive DIR] | forget-sink NAME --reason TEXT [--operator NAME]) [--token-name NAME]", flags: auditFlags, args: true, run: cmdAudit},
		"quarantine": {summary: "list, release or discard held messages", usage: "(list | release ID... [--operator NAME] | discard ID... --reason TEXT [--operator NAME]) [--token-name NAME]", flags: quarantineFlags, args: true, run: cmdQuarantine},
		"outbox":     {summary: "list, retry or drop forward entries a downstream refused; hold a pending one it keeps failing", usage: "(list | retry ID... [--member M] [--reason TEXT] [--operator NAME] | drop ID... --reason TEXT [--member M] [--operator NAME] | hold ID... --reason TEXT [--member M] [--operator NAME]) [--token-name NAME]", flags: outboxFlags, args: true, run: cmdOutbox},
		"report":     {summary: "write the after-action report (HTML or JSON) from the audit log", usage: "[--from T] [--to T] [--route NAME] [--entity E]... [--archive DIR] [-o FILE] [--format html|json] [--token-name NAME]", flags: reportFlags, args: true, run: cmdReport},
		"explain":    {summary: "an entity's lineage: every decision that changed it, and the replays suppressed beside each", usage: "ENTITY [--field F] [--at T] [--json] [--archive DIR] [--token-name NAME]", flags: explainFlags, args: true, run: cmdExplain},
		"store":      {summary: "show or accept what a shared store lost of this member's commits at a failover", usage: "(loss | accept-loss [--operator NAME]) [--token-name NAME]", flags: storeFlags, args: true, run: cmdStore},
		"lint":       {summary: "validate the configuration; list every problem", run: cmdLint},
		"config":     {summary: "print the effective configuration with all defaults", usage: "print", args: true, run: cmdConfig},
		"demo":       {summary: "a failover story end to end on embedded brokers", usage: "[--story incident|plant|redundant] [--hold 5m] [--listen ADDR] [--pace D] [--report FILE]", flags: demoFlags, noCfg: true, run: cmdDemo},
		"version":    {summary: "print the version", noCfg: true, run: cmdVersion},
		"bench":      {summary: "measure durable decisions on a generated feed (embedded store, or a shared one)", usage: "[--messages N] [--sources N] [--replays F] [--batch N] [--dir DIR | --store URL [--members N] [--journal DIR]]", flags: benchFlags, noCfg: true, run: cmdBench},
	}
}

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		usage(stdout)
		return exitOK
	}
	verb, rest := args[0], args[1:]
	cmd, ok := commands[verb]
	if !ok {
		fmt.Fprintf(stderr, "replayguard: unknown command %q\n\n", verb)
		usage(stderr)
		return exitUsage
	}
	e := &env{ctx: ctx, stdin: stdin, stdout: stdout, stderr: stderr}
	if err := e.parse(verb, cmd, rest); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		fmt.Fprintf(stderr, "replayguard %s: %v\n%s\n", verb, err, cmd.usageLine(verb))
		return exitUsage
	}
	if path := os.Getenv("REPLAYGUARD_CPUPROFILE"); path != "" {
		stop, err := startProfile(path)
		if err != nil {
			fmt.Fprintf(stderr, "replayguard %s: REPLAYGUARD_CPUPROFILE: %v\n", verb, err)
			return exitError
		}
		defer stop()
	}
	err := error(nil)
	if !cmd.noCfg {
		err = e.loadConfig(e.cfgPath)
	}
	if name := e.flagString("token-name"); err == nil && name != "" {
		err = app.CheckTokenName(e.cfg.HTTP, name) // whether the command goes through run's API or not
	}
	if err == nil {
		err = cmd.run(e)
	}
	if err != nil {
		if errors.Is(err, errUsage) {
			fmt.Fprintf(stderr, "replayguard %s: %v\n%s\n", verb, err, cmd.usageLine(verb))
			return exitUsage
		}
		fmt.Fprintf(stderr, "replayguard %s: %v\n", verb, err)
		return exitError
	}
	return exitOK
}

// parse reads the flags (anywhere among the arguments), sets up logging and
// loads the configuration.
func (e *env) parse(verb string, cmd command, args []string) error {
	fs := flag.NewFlagSet(verb, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	var cfgPath, level string
	if !cmd.noCfg { // a command that reads none takes none: it would be read by nothing
		fs.StringVar(&cfgPath, "config", "", "configuration file (default $REPLAYGUARD_CONFIG, else ./replayguard.yaml when present)")
		fs.StringVar(&cfgPath, "c", "", "shorthand for --config")
	}
	defLevel := "warn"
	if verb == "run" || verb == "demo" {
		defLevel = "info"
	}
	fs.StringVar(&level, "log-level", defLevel, "debug, info, warn or error")
	if cmd.flags != nil {
		cmd.flags(fs)
	}
	for {
		if err := fs.Parse(args); err != nil {
			return err
		}
		if fs.NArg() == 0 {
			break
		}
		e.args = append(e.args, fs.Arg(0))
		args = fs.Args()[1:]
	}
	e.flags = fs
	if len(e.args) > 0 && !cmd.args {
		return strayArgs(cmd, e.args)
	}
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return fmt.Errorf("--log-level: %v", err)
	}
	e.log = slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: lv}))
	e.cfgPath = cfgPath
	return nil
}

// cfgDefaults is the source of a configuration no file gave.
const cfgDefaults = "(defaults)"

func (e *env) loadConfig(path string) error {
	if path == "" {
		path = os.Getenv("REPLAYGUARD_CONFIG")
	}
	if path == "" {
		if _, err := os.Stat("replayguard.yaml"); err == nil {
			path = "replayguard.yaml"
		}
	}
	verb := e.flags.Name()
	forRun := verb == "lint" || verb == "run"
	var err error
	switch {
	case path == "" && forRun:
		return fmt.Errorf("no configuration: give --config FILE, set REPLAYGUARD_CONFIG, or create ./replayguard.yaml")
	case path == "":
		e.cfgSrc = cfgDefaults
		e.cfg, err = config.Parse(nil, e.cfgSrc, os.LookupEnv)
	case forRun: // what run needs is listed with the file's problems, with their lines
		e.cfgSrc = path
		e.cfg, err = config.LoadRun(path)
		if verb == "lint" {
			withLocalProblems(err)
		}
	default:
		e.cfgSrc = path
		e.cfg, err = config.Load(path)
	}
	return err
}

// withLocalProblems adds to err, a configuration's problems, those of
// the machine lint checks (files, environment variables, the store's
// directory) on what the file set, so that lint lists every problem at
// once: each on a line no problem of the file names. What lint checks
// against the servers waits until the file has none: the addresses it
// would reach may be the wrong ones.
func withLocalProblems(err error) {
	var ve *config.ValidationError
	if !errors.As(err, &ve) || ve.Partial == nil {
		return
	}
	lines := map[int]bool{}
	for _, p := range ve.Problems {
		lines[p.Line] = true
	}
	for _, p := range app.CheckLocal(ve.Partial) {
		if p.Line > 0 && lines[p.Line] || slices.Contains(ve.Problems, p) {
			continue
		}
		ve.Problems = append(ve.Problems, p)
	}
	slices.SortStableFunc(ve.Problems, func(a, b config.Problem) int { return a.Line - b.Line })
}

func (e *env) flagBool(name string) bool {
	f := e.flags.Lookup(name)
	return f != nil && f.Value.String() == "true"
}

// actionFlags refuses a flag given on the command line that action (of a
// command with several, "audit export") does not read, so that it is never
// ignored: `audit verify --from 100` verifies every record, and `outbox
// list --member M` lists every member's entries. The flags every action
// takes (--config, --log-level, --token-name) pass.
func (e *env) actionFlags(action string, takes ...string) error {
	var stray []string
	e.flags.Visit(func(f *flag.Flag) {
		if !slices.Contains(takes, f.Name) && !slices.Contains([]string{"config", "c", "log-level", "token-name"}, f.Name) {
			stray = append(stray, "--"+f.Name)
		}
	})
	if len(stray) > 0 {
		return fmt.Errorf("%w: %s does not take %s", errUsage, action, strings.Join(stray, ", "))
	}
	return nil
}

func (e *env) flagString(name string) string {
	if f := e.flags.Lookup(name); f != nil {
		return f.Value.String()
	}
	return ""
}

// tool is what app needs to run a command: the configuration, the
// logger, the output, and the API token to send to a running daemon.
func (e *env) tool() *app.Tool {
	return &app.Tool{Config: e.cfg, Log: e.log, Out: e.stdout, Err: e.stderr,
		TokenName: e.flagString("token-name"), Token: os.Getenv(EnvToken)}
}

// readFlags are the flags of state and sources.
func readFlags(fs *flag.FlagSet) {
	fs.Bool("json", false, "print JSON")
	tokenNameFlag(fs)
}

// tokenNameFlag is --token-name, of every command that can go through a
// running daemon's API.
// usageLine is the line a command-line mistake ends with:
// "usage: replayguard VERB [--config FILE]" ([--config FILE] left out for
// a command that reads no configuration), then the arguments when the
// command takes any.
func (c command) usageLine(verb string) string {
	line := "usage: replayguard " + verb
	if !c.noCfg {
		line += " [--config FILE]"
	}
	if c.usage != "" {
		line += " " + c.usage
	}
	return line
}

func tokenNameFlag(fs *flag.FlagSet) {
	fs.String("token-name", "", "through a running daemon's API: the http.tokens entry whose token to send (default $"+EnvToken+")")
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "replayguard — exactly-once effect on top of at-least-once feeds")
	fmt.Fprintln(w, "\nusage: replayguard COMMAND [--config FILE] [ARGS]\n\ncommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		c := commands[n]
		fmt.Fprintf(w, "  %-11s %s\n", n, c.summary)
		if c.usage != "" {
			fmt.Fprintf(w, "  %-11s   replayguard %s %s\n", "", n, c.usage)
		}
	}
	fmt.Fprintln(w, "\nEvery command but demo, bench and version takes --config/-c FILE; every one takes --log-level LEVEL.")
	fmt.Fprintln(w, strings.TrimSpace(`
Exit status is 0 on success, 1 on any error (a message on stderr), 2 on a
command-line mistake.`))
}

// startProfile writes a CPU profile of the command to path ("%p" is the
// process id), for measuring
// where a benchmark's time goes.
func startProfile(path string) (stop func(), err error) {
	f, err := os.Create(strings.ReplaceAll(path, "%p", strconv.Itoa(os.Getpid())))
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

// strayArgs is the error of a command given arguments it takes none of:
// `lint other.yaml` would otherwise check ./replayguard.yaml and say it is
// fine.
func strayArgs(cmd command, args []string) error {
	err := fmt.Errorf("takes no arguments, got %q", args)
	if !cmd.noCfg && looksLikeConfig(args[0]) {
		err = fmt.Errorf("%w: to use %s as the configuration, give --config %s", err, args[0], args[0])
	}
	return err
}

// looksLikeConfig says whether arg names a YAML file.
func looksLikeConfig(arg string) bool {
	ext := strings.ToLower(filepath.Ext(arg))
	return ext == ".yaml" || ext == ".yml"
}
