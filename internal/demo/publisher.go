package demo

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/eclipse/paho.golang/paho"
)

// publisher is a story's producer's connection to one broker (the field
// gateway's, the edge node's). It publishes without a session: once a
// message is PUBACKed, the broker has it.
type publisher struct {
	cli *paho.Client
}

func dialPublisher(ctx context.Context, addr, clientID string) (*publisher, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("publisher: %w", err)
	}
	cli := paho.NewClient(paho.ClientConfig{ClientID: clientID, Conn: conn})
	if _, err := cli.Connect(ctx, &paho.Connect{ClientID: clientID, CleanStart: true, KeepAlive: 30}); err != nil {
		return nil, fmt.Errorf("publisher: connect: %w", err) // paho closed the connection
	}
	return &publisher{cli: cli}, nil
}

// send publishes m at QoS 1 and returns once the broker acknowledged it.
func (p *publisher) send(ctx context.Context, m feedMsg) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	pr, err := p.cli.Publish(ctx, &paho.Publish{Topic: m.topic, QoS: 1, Payload: m.payload})
	if err != nil {
		return fmt.Errorf("publish %s: %w", m.label, err)
	}
	if pr != nil && pr.ReasonCode >= 0x80 {
		return fmt.Errorf("publish %s: refused: reason code 0x%02x", m.label, pr.ReasonCode)
	}
	return nil
}

// close disconnects cleanly; on a connection the broker already ended,
// it only releases the client.
func (p *publisher) close() {
	p.cli.Disconnect(&paho.Disconnect{})
	<-p.cli.Done()
}
