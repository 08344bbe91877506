package forward

import (
	"context"
	"fmt"
	"io"
	"sync"

	"github.com/eclipse/paho.golang/packets"
	"github.com/eclipse/paho.golang/paho/session"
	"github.com/eclipse/paho.golang/paho/session/state"
	"github.com/eclipse/paho.golang/paho/store/memory"
)

// pubSession is paho's in-memory session state of one connection, which
// also hands each PUBLISH's PUBACK reason code to the channel its sender
// set with expect. paho's asynchronous publish (which returns once the
// packet is written, so that one goroutine writes the publishes in order)
// reports no acknowledgement of its own.
//
// expect and the publish that follows it are called by one goroutine at a
// time; paho calls AddToSession on that goroutine, within the publish, and
// PacketReceived on its reading goroutine.
type pubSession struct {
	session.SessionManager

	mu      sync.Mutex
	next    chan<- byte            // for the publish under way
	waiting map[uint16]chan<- byte // packet id → its sender's channel
}

func newPubSession() *pubSession {
	return &pubSession{SessionManager: state.New(unkept{}, memory.New()), waiting: map[uint16]chan<- byte{}}
}

// unkept is the store of the publishes paho would resend on a connection
// that resumes its session. The output's connections never do (a clean
// session that ends with them: the outbox sends again what had no PUBACK),
// so it keeps none: paho's in-memory store copied every PUBLISH into it.
type unkept struct{}

func (unkept) Put(uint16, byte, io.WriterTo) error { return nil }
func (unkept) Get(id uint16) (io.ReadCloser, error) {
	return nil, fmt.Errorf("publish %d was not kept: the output resends from its outbox", id)
}
func (unkept) Delete(uint16) error     { return nil }
func (unkept) Quarantine(uint16) error { return nil }
func (unkept) List() ([]uint16, error) { return nil, nil }
func (unkept) Reset() error            { return nil }

// expect names the channel (buffered, one slot) that receives the reason
// code of the next PUBLISH's PUBACK.
func (s *pubSession) expect(ack chan<- byte) {
	s.mu.Lock()
	s.next = ack
	s.mu.Unlock()
}

// AddToSession notes which channel waits for the packet id paho assigned.
func (s *pubSession) AddToSession(ctx context.Context, p session.Packet, resp chan<- packets.ControlPacket) error {
	if err := s.SessionManager.AddToSession(ctx, p, resp); err != nil {
		return err
	}
	if pb, ok := p.(*packets.Publish); ok {
		s.mu.Lock()
		if s.next != nil {
			s.waiting[pb.PacketID] = s.next
			s.next = nil
		}
		s.mu.Unlock()
	}
	return nil
}

// PacketReceived hands a PUBACK's reason code over before paho frees its
// packet id for the next publish.
func (s *pubSession) PacketReceived(recv *packets.ControlPacket, pubs chan<- *packets.Publish) error {
	if pa, ok := recv.Content.(*packets.Puback); ok {
		s.mu.Lock()
		ack := s.waiting[pa.PacketID]
		delete(s.waiting, pa.PacketID)
		s.mu.Unlock()
		if ack != nil {
			ack <- pa.ReasonCode
		}
	}
	return s.SessionManager.PacketReceived(recv, pubs)
}
