package demo

import (
	"strings"

	"github.com/cockroachdb/apd/v3"
)

// The stories Run can tell (Options.Story).
const (
	StoryIncident = "incident" // the default: a structure fire on the common operating picture
	StoryPlant    = "plant"    // a plant's energy meter over Sparkplug B
	// StoryRedundant: the structure fire on two broker paths at once
	// (mqtt.feeds), one of which dies.
	StoryRedundant = "redundant"
)

// Stories lists the stories by name, the default first.
var Stories = []string{StoryIncident, StoryPlant, StoryRedundant}

// storyNames lists Stories in a sentence: "incident, plant and redundant".
func storyNames() string {
	last := len(Stories) - 1
	if last == 0 {
		return Stories[0]
	}
	return strings.Join(Stories[:last], ", ") + " and " + Stories[last]
}

// msgID names one message by what its producer controls, as replayguard's
// audit record names it: the source's parts joined by '/', the epoch's
// text and the sequence.
type msgID struct {
	source, epoch string
	seq           int64
}

// feedMsg is one message a story's producer publishes at QoS 1.
type feedMsg struct {
	topic   string
	payload []byte
	id      msgID
	// label and says narrate it ("fire/cad-1 #2", "engine E7 assigned");
	// a message whose says is "" is published without a line or a pause.
	label, says string
}

// applier applies deliveries to a picture the way a story's consumers do,
// without asking whether they were seen before. It may keep state of its
// own (a Sparkplug host's alias tables); it is not safe for concurrent use.
type applier interface {
	apply(p picture, topic string, payload []byte)
}

// story is one tale told on the demo's failover machinery: the messages of
// its three acts (held by the primary while the consumers are offline;
// published while they are back; published on the standby after the
// failover), replayguard's configuration, how the naive consumer (and the
// dispatch board) apply a message, the truth, and the story's own lines.
type story struct {
	name  string
	title string // the first line of the narration
	noun  string // what its messages are called: "report"
	link  string // the consumers' network: "dispatch link"
	// filter is what the consumers subscribe to; config is replayguard's
	// configuration, whose ${DEMO_*} variables guardConfig fills in.
	filter, config string
	// clean adds the COP broker, replayguard's forward effect to it, and a
	// dispatch board that keys on replayguard-key.
	clean bool
	// paths tells the story on two broker paths, a and b, each a broker of
	// its own and neither with a standby: the producer publishes to both,
	// replayguard consumes both at once (mqtt.feeds), the naive consumer
	// one at a time; its acts are playPaths'.
	paths             bool
	held, live, after []feedMsg
	// producer is the client id the messages are published with.
	producer string
	// connected keeps the producer's connection open after an act, as an
	// edge node does: it ends when the broker ends it (the checkpoint's
	// restart, the failover), and the next act opens a new one.
	connected  bool
	newApplier func() applier
	truth      picture
	// pictureTitle heads the table; truthColumn names its truth column.
	pictureTitle, truthColumn string
	// lineage is the entity whose lineage the demo prints after the table,
	// as `replayguard explain` does.
	lineage string
	// intro, restarted, replayed and notice add the story's own lines to
	// the narration (each may be nil): after the set-up, after the
	// checkpoint, after the standby's resend, and after the table.
	intro     func(d *demo)
	restarted func(d *demo)
	replayed  func(d *demo, naive counts)
	notice    func(d *demo, res *result)
	// summary, when set, replaces the lines on what each consumer was
	// delivered that follow the table.
	summary func(d *demo, res *result)

	byPayload map[string]msgID // the observers name a delivery by its bytes
}

// newStoryNamed returns the story called name, one of Stories, indexed.
func newStoryNamed(name string) *story {
	s := newIncidentStory()
	switch name {
	case StoryPlant:
		s = newPlantStory()
	case StoryRedundant:
		s = newRedundantStory()
	}
	s.byPayload = map[string]msgID{}
	for _, m := range s.all() {
		s.byPayload[string(m.payload)] = m.id
	}
	return &s
}

// idOf names the message a delivery carries, or nil when the story never
// published its bytes.
func (s *story) idOf(payload []byte) *msgID {
	if id, ok := s.byPayload[string(payload)]; ok {
		return &id
	}
	return nil
}

func (s *story) all() []feedMsg {
	out := append([]feedMsg{}, s.held...)
	out = append(out, s.live...)
	return append(out, s.after...)
}

// truthOf is the picture of every message applied once, in order.
func truthOf(a applier, msgs []feedMsg) picture {
	p := picture{}
	for _, m := range msgs {
		a.apply(p, m.topic, m.payload)
	}
	return p
}

// picture is a common operating picture: entity -> field -> value as text.
type picture map[string]map[string]string

func (p picture) set(entity, field, value string) {
	if p[entity] == nil {
		p[entity] = map[string]string{}
	}
	p[entity][field] = value
}

// add adds the decimal text v to a field, exactly, as the engine's add
// does. A value that is not a number is left out.
func (p picture) add(entity, field, v string) {
	sum, err := addDecimal(p[entity][field], v)
	if err == nil {
		p.set(entity, field, sum)
	}
}

// exact does exact decimal arithmetic, as the engine does: meter sums must
// not round.
var exact = apd.Context{Precision: 0, MaxExponent: apd.MaxExponent, MinExponent: apd.MinExponent,
	Traps: apd.DefaultTraps | apd.Inexact | apd.Rounded}

// addDecimal is a + b in the engine's canonical decimal text ("" is 0).
func addDecimal(a, b string) (string, error) {
	var x, y, sum apd.Decimal
	if a != "" {
		if _, _, err := x.SetString(a); err != nil {
			return "", err
		}
	}
	if _, _, err := y.SetString(b); err != nil {
		return "", err
	}
	if _, err := exact.Add(&sum, &x, &y); err != nil {
		return "", err
	}
	sum.Reduce(&sum)
	if sum.IsZero() {
		return "0", nil
	}
	return sum.Text('f'), nil
}

// subDecimal is a − b in canonical decimal text.
func subDecimal(a, b string) (string, error) {
	if strings.HasPrefix(b, "-") {
		return addDecimal(a, b[1:])
	}
	return addDecimal(a, "-"+b)
}

// clone returns a copy of p.
func (p picture) clone() picture {
	out := picture{}
	for e, fs := range p {
		for f, v := range fs {
			out.set(e, f, v)
		}
	}
	return out
}
