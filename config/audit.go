package config

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"
)

// DefaultRetentionInterval is how often run applies audit retention, and
// MinRetentionInterval the shortest interval taken: below it retention
// runs back to back (an idle run with interval: 1ns took 79% of a core).
const (
	DefaultRetentionInterval = Duration(time.Minute)
	MinRetentionInterval     = Duration(10 * time.Millisecond)
)

// AuditConfig is the audit log's lifecycle in the store.
type AuditConfig struct {
	// Retention bounds the records the store keeps; the older ones move to
	// Archive first. Default: no retention, the store keeps every record.
	Retention RetentionConfig `yaml:"retention,omitempty"`
	// Archive is the directory that receives the sealed segments of the
	// records retention moves out of the store; audit verify --archive
	// reads it. On a shared store each member's chain has its own
	// subdirectory, member-<id>, written by whichever member trims that
	// chain (its own, or a departed member's it took over): give every
	// member the same directory (a shared file system) so that the archive
	// of a chain stays whole. Required with retention. Default "" (none).
	Archive string `yaml:"archive,omitempty"`
	// Sinks receive every committed audit record, at least once and in
	// order (on a shared store in order per member's chain, each chain
	// streamed by the member that writes it, or by another once that
	// member is gone). Default none.
	Sinks []SinkConfig `yaml:"sinks,omitempty"`
}

// RetentionConfig says when audit records leave the store: a record older
// than MaxAge, or beyond the newest MaxRecords, leaves. A record a held
// quarantine entry needs stays until the entry is released or discarded.
type RetentionConfig struct {
	// MaxAge is the oldest a stored record may be. Default 0: no age limit.
	MaxAge Duration `yaml:"max_age,omitempty"`
	// MaxRecords is the most records the store keeps. Default 0: no count
	// limit.
	MaxRecords int64 `yaml:"max_records,omitempty"`
	// Interval is how often run applies retention (ingest applies it once,
	// at its end), at least 10ms. Default 1m when retention is on.
	Interval Duration `yaml:"interval,omitempty"`
}

// Enabled reports whether any retention limit is set.
func (r RetentionConfig) Enabled() bool { return r.MaxAge != 0 || r.MaxRecords != 0 }

func (a *AuditConfig) setDefaults() {
	if a.Retention.Enabled() {
		setDuration(&a.Retention.Interval, DefaultRetentionInterval)
	}
	for i := range a.Sinks {
		a.Sinks[i].setDefaults()
	}
}

// givenZerosOfAudit lists the audit settings whose zero means their
// default, for checkGivenZeros: retention's interval and limits, and each sink's
// timeout (otlp), max_message (syslog) and keep (a file sink that
// rotates: keep: 0 would keep five rotated files).
func (c *Config) givenZerosOfAudit() []givenZero {
	r := c.Audit.Retention
	zs := []givenZero{
		{"audit.retention.interval", r.Interval == 0, DefaultRetentionInterval},
		// A limit written 0 is no limit: retention silently off.
		{"audit.retention.max_age", r.MaxAge == 0, "none: no age limit"},
		{"audit.retention.max_records", r.MaxRecords == 0, "none: no count limit"},
	}
	for i, s := range c.Audit.Sinks {
		k := fmt.Sprintf("audit.sinks[%d].", i)
		switch s.Kind {
		case SinkOTLP:
			zs = append(zs, givenZero{k + "timeout", s.Timeout == 0, DefaultSinkTimeout})
		case SinkSyslog:
			zs = append(zs, givenZero{k + "max_message", s.MaxMessage == 0, DefaultSyslogMaxMessage})
		case SinkFile:
			zs = append(zs, givenZero{k + "keep", s.Keep == 0 && s.MaxBytes > 0, DefaultSinkKeep})
		}
	}
	return zs
}

// check refuses retention without an archive: the records it drops would
// leave the store unverifiably, and the chain could no longer be checked
// from its first record.
func (a AuditConfig) check(ps *problems, f field, store StoreConfig) {
	r, rf := a.Retention, f.dot("retention")
	if r.MaxAge < 0 {
		ps.add(rf.dot("max_age"), "max_age must be positive, got %v", r.MaxAge)
	}
	if r.MaxRecords < 0 {
		ps.add(rf.dot("max_records"), "max_records must be at least 1, got %d", r.MaxRecords)
	}
	switch {
	case r.Interval < 0 || (!r.Enabled() && r.Interval != 0):
		ps.add(rf.dot("interval"), "interval needs a positive duration and a retention limit (max_age or max_records), got %v", r.Interval)
	case r.Interval > 0 && r.Interval < MinRetentionInterval:
		ps.add(rf.dot("interval"), "interval %v is below %v: retention would run back to back, a core busy for nothing; the default is %v",
			r.Interval, MinRetentionInterval, DefaultRetentionInterval)
	}
	if r.Enabled() && a.Archive == "" {
		ps.add(f.dot("archive"), "archive is required with audit.retention: name the directory that keeps the records the store drops, so the chain stays verifiable")
	}
	if a.Archive != "" && store.Kind == StoreEmbedded && store.Path != "" && filepath.Clean(a.Archive) == filepath.Clean(store.Path) {
		ps.add(f.dot("archive"), "archive %s is the store's directory: give the archive a directory of its own", a.Archive)
	}
	if a.Archive != "" && store.Shared() && strings.ContainsAny(store.Member, `/\`) {
		ps.add(field{}.dot("store").dot("member"), "member id %q holds a path separator: the archive keeps each member's segments in a directory named after its id; give the member an id without / or \\", store.Member)
	}
	checkSinks(ps, f.dot("sinks"), a.Sinks)
}
