package journal

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"time"

	"github.com/replayguard/replayguard/engine"
)

// A record on disk is a frame: 4 bytes little-endian length of the body, 4
// bytes CRC-32C of the body, then the body:
//
//	version 1 byte | kind 1 byte | time unix nanos varint
//	[key time unix nanos varint, in version 2; 0: none]
//	head position uvarint | head hash 32 bytes | first uvarint
//	lost position uvarint | lost hash 32 bytes
//	messages uvarint, each: topic, payload, broker, invalid (uvarint length + bytes),
//	flags 1 byte (1: the DUP flag, 2: first applied, 4: a feed follows),
//	[feed (uvarint length + bytes)]
//	action (uvarint length + bytes)
//	[redecides position uvarint | redecides hash 32 bytes
//	 [connected uvarint n, each: message index uvarint | unix nanos varint]]
//
// The redecides field is there for a batch a recovery decided again
// (engine.JournalEntry.Redecides), or, its position 0 and its hash zero,
// before the connected field: a body that ends after the action has
// neither, as every body written before the fields existed. The connected
// field names the messages that were the first delivery of their broker
// connection (engine.Message.Connected), in order, with when it came up,
// so that a recovery's records carry it as the lost ones did; a build
// from before it reads the body as one without it.
//
// Version 2 adds the key time (engine.JournalEntry.KeyTime): the group's
// clock a batch's keys were stamped by, which a recovery judges the
// batch's age by. This build writes version 2 and reads both; a build
// from before it does not read version 2.
//
// A frame cut short or whose CRC does not match ends the segment: it is the
// torn tail of an append that never returned.
const (
	frameHeader   = 8
	recordVersion = 2
	maxFrame      = 1 << 30
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// A message's flags.
const (
	flagDup       = 1 // the transport's DUP flag
	flagEffective = 2 // first decided applied or applied_late
	flagFeed      = 4 // the redundant path that delivered it (mqtt.feeds) follows
)

var errCorrupt = errors.New("journal record does not decode")

// appendFrame encodes e as one frame after buf.
func appendFrame(buf []byte, e *engine.JournalEntry) []byte {
	start := len(buf)
	buf = append(buf, make([]byte, frameHeader)...)
	buf = append(buf, recordVersion, byte(e.Kind))
	buf = binary.AppendVarint(buf, e.Time.UnixNano())
	keyTime := int64(0)
	if !e.KeyTime.IsZero() {
		keyTime = e.KeyTime.UnixNano()
	}
	buf = binary.AppendVarint(buf, keyTime)
	buf = binary.AppendUvarint(buf, e.Head.Position)
	buf = append(buf, e.Head.Hash[:]...)
	buf = binary.AppendUvarint(buf, e.First)
	buf = binary.AppendUvarint(buf, e.Lost.Position)
	buf = append(buf, e.Lost.Hash[:]...)
	buf = binary.AppendUvarint(buf, uint64(len(e.Messages)))
	for i := range e.Messages {
		m := &e.Messages[i]
		buf = appendBytes(buf, m.Topic)
		buf = appendBytes(buf, string(m.Payload))
		buf = appendBytes(buf, m.Broker)
		buf = appendBytes(buf, m.Invalid)
		flags := byte(0)
		if m.Dup {
			flags |= flagDup
		}
		if i < len(e.Effective) && e.Effective[i] {
			flags |= flagEffective
		}
		if m.Feed != "" {
			flags |= flagFeed
		}
		buf = append(buf, flags)
		if m.Feed != "" {
			buf = appendBytes(buf, m.Feed)
		}
	}
	buf = appendBytes(buf, e.Action)
	connected := 0
	for i := range e.Messages {
		if !e.Messages[i].Connected.IsZero() {
			connected++
		}
	}
	if e.Redecides.Position > 0 || connected > 0 {
		buf = binary.AppendUvarint(buf, e.Redecides.Position)
		buf = append(buf, e.Redecides.Hash[:]...)
	}
	if connected > 0 {
		buf = binary.AppendUvarint(buf, uint64(connected))
		for i := range e.Messages {
			if at := e.Messages[i].Connected; !at.IsZero() {
				buf = binary.AppendUvarint(buf, uint64(i))
				buf = binary.AppendVarint(buf, at.UnixNano())
			}
		}
	}
	body := buf[start+frameHeader:]
	binary.LittleEndian.PutUint32(buf[start:], uint32(len(body)))
	binary.LittleEndian.PutUint32(buf[start+4:], crc32.Checksum(body, castagnoli))
	return buf
}

func appendBytes(buf []byte, s string) []byte {
	buf = binary.AppendUvarint(buf, uint64(len(s)))
	return append(buf, s...)
}

// decodeBody decodes a frame's body; with messages false it skips them
// (the index needs only the head and the action) but still checks their
// framing, so that both modes accept the same bodies.
func decodeBody(b []byte, messages bool) (engine.JournalEntry, error) {
	d := decoder{b: b}
	var e engine.JournalEntry
	v := d.byte()
	if v != 1 && v != recordVersion {
		return e, errCorrupt
	}
	e.Kind = engine.JournalKind(d.byte())
	e.Time = time.Unix(0, d.varint())
	if v >= 2 {
		if at := d.varint(); at != 0 {
			e.KeyTime = time.Unix(0, at).UTC()
		}
	}
	e.Head.Position = d.uvarint()
	d.hash(&e.Head.Hash)
	e.First = d.uvarint()
	e.Lost.Position = d.uvarint()
	d.hash(&e.Lost.Hash)
	n := d.uvarint()
	// Each message takes at least 5 bytes (four lengths and dup): a count
	// above that is damage, not an allocation to make.
	if d.err == nil && n > uint64(len(d.b))/5 {
		d.err = errCorrupt
	}
	if d.err == nil {
		if messages {
			if n > 0 {
				e.Messages, e.Effective = make([]engine.Message, n), make([]bool, n)
			}
			for i := range e.Messages {
				m := &e.Messages[i]
				m.Topic = string(d.bytes())
				m.Payload = d.bytes()
				m.Broker = string(d.bytes())
				m.Invalid = string(d.bytes())
				flags := d.byte()
				m.Dup, e.Effective[i] = flags&flagDup != 0, flags&flagEffective != 0
				if flags&flagFeed != 0 {
					m.Feed = string(d.bytes())
				}
			}
		} else {
			for range n {
				d.skip()
				d.skip()
				d.skip()
				d.skip()
				if d.byte()&flagFeed != 0 {
					d.skip()
				}
			}
		}
		e.Action = string(d.bytes())
		if len(d.b) > 0 {
			e.Redecides.Position = d.uvarint()
			d.hash(&e.Redecides.Hash)
			// Position 0 is no batch decided again: written only as
			// the place before the connected field, its hash zero.
			if e.Redecides.Position == 0 && e.Redecides.Hash != (engine.Hash{}) {
				d.err = errCorrupt
			}
		}
		if d.err == nil && len(d.b) > 0 {
			k := d.uvarint()
			if k == 0 || k > n { // written only for a message that has one
				d.err = errCorrupt
			}
			next := uint64(0)
			for range k {
				i, at := d.uvarint(), d.varint()
				if d.err != nil || i < next || i >= n {
					d.err = errCorrupt
					break
				}
				if messages {
					e.Messages[i].Connected = time.Unix(0, at).UTC()
				}
				next = i + 1
			}
			if d.err == nil && len(d.b) > 0 {
				d.err = errCorrupt
			}
		}
	}
	if d.err != nil || e.Kind < engine.JournalBatch || e.Kind > engine.JournalRecoveryDone {
		return e, errCorrupt
	}
	return e, nil
}

// decoder reads a body, remembering the first error.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) byte() byte {
	if len(d.b) < 1 {
		d.err = errCorrupt
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = errCorrupt
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.err = errCorrupt
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) hash(h *engine.Hash) {
	if len(d.b) < len(h) {
		d.err = errCorrupt
		return
	}
	copy(h[:], d.b)
	d.b = d.b[len(h):]
}

// skip passes over a length-prefixed field without copying it.
func (d *decoder) skip() {
	n := d.uvarint()
	if d.err != nil || n > uint64(len(d.b)) {
		d.err = errCorrupt
		return
	}
	d.b = d.b[n:]
}

func (d *decoder) bytes() []byte {
	n := d.uvarint()
	if d.err != nil || n > uint64(len(d.b)) {
		d.err = errCorrupt
		return nil
	}
	v := append([]byte(nil), d.b[:n]...)
	d.b = d.b[n:]
	return v
}
