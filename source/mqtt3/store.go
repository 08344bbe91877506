package mqtt3

import (
	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/eclipse/paho.mqtt.golang/packets"
)

// noStore is paho's Store for a client that lives for one connection and
// never publishes: paho puts every QoS 1 and 2 delivery in its store and
// deletes it as the PUBACK goes out (a formatted key and a locked map, per
// message), only to send again, on a later connection of the same client,
// what the store still holds. Each connection of the consumer is a client
// of its own, so nothing is ever read back: the store keeps nothing.
type noStore struct{}

var _ paho.Store = noStore{}

func (noStore) Open()                             {}
func (noStore) Put(string, packets.ControlPacket) {}
func (noStore) Get(string) packets.ControlPacket  { return nil }
func (noStore) All() []string                     { return nil }
func (noStore) Del(string)                        {}
func (noStore) Close()                            {}
func (noStore) Reset()                            {}
