package demo

import (
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	mochi "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"
)

// newStoreBroker returns an unserved mochi server with a sessionStore on dir.
func newStoreBroker(t *testing.T, dir string) (*mochi.Server, *sessionStore) {
	t.Helper()
	srv := mochi.New(&mochi.Options{Logger: testLogger(t)})
	store := new(sessionStore)
	if err := srv.AddHook(store, &sessionStoreOptions{Dir: dir}); err != nil {
		t.Fatal(err)
	}
	return srv, store
}

func qos1(id uint16, topic, payload string) packets.Packet {
	return packets.Packet{
		FixedHeader: packets.FixedHeader{Type: packets.Publish, Qos: 1},
		PacketID:    id,
		TopicName:   topic,
		Payload:     []byte(payload),
		Created:     time.Now().Unix(),
	}
}

func TestAReopenedSessionStoreRestoresInflightMessagesWithTheirPacketIDs(t *testing.T) {
	dir := t.TempDir()
	srv, store := newStoreBroker(t, dir)
	cl := srv.NewClient(nil, listenerID, "consumer-1", false)
	cl.Properties.ProtocolVersion = 5
	cl.Properties.Props.SessionExpiryInterval = 3600
	store.OnSessionEstablished(cl, packets.Packet{})
	store.OnSubscribed(cl, packets.Packet{Filters: packets.Subscriptions{{Filter: "incidents/#", Qos: 1}}}, []byte{1})
	sent := map[uint16]string{}
	for _, id := range []uint16{1, 2, 7, 300, 65535} {
		sent[id] = fmt.Sprintf(`{"sequence":%d}`, id)
		store.OnQosPublish(cl, qos1(id, "incidents/fire/cad-1", sent[id]), time.Now().Unix(), 0)
	}
	store.OnQosComplete(cl, qos1(2, "incidents/fire/cad-1", ""))  // acknowledged
	store.OnQosDropped(cl, qos1(300, "incidents/fire/cad-1", "")) // given up
	delete(sent, 2)
	delete(sent, 300)
	resent := qos1(7, "incidents/fire/cad-1", sent[7])
	resent.FixedHeader.Dup = true
	store.OnQosPublish(cl, resent, time.Now().Unix(), 1) // a resend rewrites the same message
	srv.Close()

	held, err := inflightBySession(dir)
	if err != nil {
		t.Fatal(err)
	}
	if held["consumer-1"] != len(sent) {
		t.Errorf("inflightBySession = %v, want %d for consumer-1", held, len(sent))
	}

	srv, _ = newStoreBroker(t, dir)
	if err := srv.Serve(); err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	restored, ok := srv.Clients.Get("consumer-1")
	if !ok {
		t.Fatal("the reopened store did not restore consumer-1's session")
	}
	if got := restored.Properties.Props.SessionExpiryInterval; got != 3600 {
		t.Errorf("restored session expiry = %d, want 3600", got)
	}
	if _, ok := restored.State.Subscriptions.Get("incidents/#"); !ok {
		t.Error("the restored session lacks its subscription to incidents/#")
	}
	got := map[uint16]string{}
	for _, pk := range restored.State.Inflight.GetAll(false) {
		got[pk.PacketID] = string(pk.Payload)
		if pk.FixedHeader.Qos != 1 || pk.TopicName != "incidents/fire/cad-1" {
			t.Errorf("packet %d restored as QoS %d on %q", pk.PacketID, pk.FixedHeader.Qos, pk.TopicName)
		}
		if want := pk.PacketID == 7; pk.FixedHeader.Dup != want {
			t.Errorf("packet %d restored with DUP=%v, want %v", pk.PacketID, pk.FixedHeader.Dup, want)
		}
	}
	if !maps.Equal(got, sent) {
		t.Errorf("restored in-flight packets %v, want %v (ids %v)", got, sent, slices.Sorted(maps.Keys(sent)))
	}
}

func TestASessionStoreExpiresSessionsAndKeepsRetainedMessages(t *testing.T) {
	dir := t.TempDir()
	srv, store := newStoreBroker(t, dir)
	gone := srv.NewClient(nil, listenerID, "clean-consumer", false)
	gone.Properties.ProtocolVersion = 5 // session expiry 0: the session ends with the connection
	store.OnSessionEstablished(gone, packets.Packet{})
	store.OnDisconnect(gone, nil, true)
	pub := srv.NewClient(nil, listenerID, "gateway", false)
	retained := qos1(0, "status/gateway", "online")
	retained.FixedHeader.Retain = true
	store.OnRetainMessage(pub, retained, 1)
	cleared := qos1(0, "status/old", "x")
	store.OnRetainMessage(pub, cleared, 1)
	store.OnRetainMessage(pub, cleared, -1)
	srv.Close()

	srv, _ = newStoreBroker(t, dir)
	if err := srv.Serve(); err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if _, ok := srv.Clients.Get("clean-consumer"); ok {
		t.Error("an ended session was restored")
	}
	if msgs := srv.Topics.Messages("status/#"); len(msgs) != 1 || string(msgs[0].Payload) != "online" {
		t.Errorf("restored retained messages %v, want only status/gateway online", msgs)
	}
}

func TestARestoredSessionResendsItsMessagesInTheOrderTheyWereSent(t *testing.T) {
	dir := t.TempDir()
	srv, store := newStoreBroker(t, dir)
	cl := srv.NewClient(nil, listenerID, "consumer-1", false)
	cl.Properties.ProtocolVersion = 5
	cl.Properties.Props.SessionExpiryInterval = 3600
	store.OnSessionEstablished(cl, packets.Packet{})
	other := srv.NewClient(nil, listenerID, "consumer-2", false)
	other.Properties.ProtocolVersion = 5
	other.Properties.Props.SessionExpiryInterval = 3600
	store.OnSessionEstablished(other, packets.Packet{})
	// 0xffff: the second the first of them was sent in ends a uint16 span,
	// the rest fall in the next one.
	created := (time.Now().Unix() &^ 0xffff) - 1
	var want []uint16
	for id := uint16(1); id <= 40; id++ {
		pk := qos1(id, "spBv1.0/plant/NDATA/meter-3", fmt.Sprint(id))
		pk.Created = created + int64(id/8) // eight a second, as a broker stamps them
		store.OnQosPublish(cl, pk, pk.Created, 0)
		store.OnQosPublish(other, pk, pk.Created, 0)
		want = append(want, id)
	}
	srv.Close()

	srv, _ = newStoreBroker(t, dir)
	if err := srv.Serve(); err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	for _, id := range []string{"consumer-1", "consumer-2"} {
		restored, ok := srv.Clients.Get(id)
		if !ok {
			t.Fatalf("the reopened store did not restore %s's session", id)
		}
		var got []uint16
		for _, pk := range restored.State.Inflight.GetAll(false) { // the order mochi resends them in
			got = append(got, pk.PacketID)
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s's messages come back as %v, want %v", id, got, want)
		}
	}
}
