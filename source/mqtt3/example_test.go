package mqtt3_test

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/source/mqtt3"
)

// A Processor stands in for *engine.Engine: it must decide and durably
// commit the whole batch before returning nil.
type printProcessor struct{ log *slog.Logger }

func (p printProcessor) Process(_ context.Context, msgs []engine.Message) ([]engine.Decision, error) {
	for _, m := range msgs {
		p.log.Info("message", "topic", m.Topic, "dup", m.Dup, "broker", m.Broker)
	}
	return make([]engine.Decision, len(msgs)), nil
}

func ExampleNew() {
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	c, err := mqtt3.New(mqtt3.Config{
		Brokers:    []string{"tcp://127.0.0.1:1883", "tcp://127.0.0.1:1884"}, // primary, standby
		ClientID:   "replayguard-1",                                          // CleanSession 0 under this id
		ShareGroup: "",                                                       // or a group: $share/<group>/<filter>
		Filters:    []mqtt3.Filter{{Topic: "incidents/#", QoS: 1}},
		Logger:     logger,
	}, printProcessor{logger})
	if err != nil {
		logger.Error("config", "err", err)
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := c.Run(ctx); err != nil { // returns nil after SIGINT/SIGTERM, once the batch in hand is acknowledged
		logger.Error("consume", "err", err)
	}
}
