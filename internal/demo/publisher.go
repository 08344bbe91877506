package demo

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/eclipse/paho.golang/paho"
)

// publisherID is the field gateway's client id. It publishes without a
// session: once a report is PUBACKed, the broker has it.
const publisherID = "demo-field-gateway"

// publisher is the field gateway's connection to one broker.
type publisher struct {
	cli *paho.Client
}

func dialPublisher(ctx context.Context, addr string) (*publisher, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("publisher: %w", err)
	}
	cli := paho.NewClient(paho.ClientConfig{ClientID: publisherID, Conn: conn})
	if _, err := cli.Connect(ctx, &paho.Connect{ClientID: publisherID, CleanStart: true, KeepAlive: 30}); err != nil {
		return nil, fmt.Errorf("publisher: connect: %w", err) // paho closed the connection
	}
	return &publisher{cli: cli}, nil
}

// send publishes r at QoS 1 and returns once the broker acknowledged it.
func (p *publisher) send(ctx context.Context, r report) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	pr, err := p.cli.Publish(ctx, &paho.Publish{Topic: r.topic(), QoS: 1, Payload: r.payload()})
	if err != nil {
		return fmt.Errorf("publish %s: %w", r.label(), err)
	}
	if pr != nil && pr.ReasonCode >= 0x80 {
		return fmt.Errorf("publish %s: refused: reason code 0x%02x", r.label(), pr.ReasonCode)
	}
	return nil
}

func (p *publisher) close() {
	p.cli.Disconnect(&paho.Disconnect{})
	<-p.cli.Done()
}
