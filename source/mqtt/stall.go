package mqtt

import (
	"context"
	"net"

	"github.com/eclipse/paho.golang/paho"
)

// stallPinger is paho's default keepalive pinger, which fails a connection
// whose PINGRESP has not come a keepalive period after its PINGREQ, with a
// report of that failure; it tells onPingResp of every PINGRESP. One
// instance serves the consumer's successive connections: paho runs it once
// per connection, never two at once.
type stallPinger struct {
	*paho.DefaultPinger
	onStall    func(error)
	onPingResp func()
}

func newStallPinger(onStall func(error), onPingResp func()) *stallPinger {
	return &stallPinger{DefaultPinger: paho.NewDefaultPinger(), onStall: onStall, onPingResp: onPingResp}
}

// PingResp notes a PINGRESP.
func (p *stallPinger) PingResp() {
	p.DefaultPinger.PingResp()
	p.onPingResp()
}

// Run keeps the connection alive until ctx is done, or reports a stall.
func (p *stallPinger) Run(ctx context.Context, conn net.Conn, keepAlive uint16) error {
	err := p.DefaultPinger.Run(ctx, conn, keepAlive)
	if err != nil && ctx.Err() == nil {
		p.onStall(err)
	}
	return err
}
