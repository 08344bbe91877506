package demo

import (
	"bytes"
	"encoding"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	mochi "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/hooks/storage"
	"github.com/mochi-mqtt/server/v2/packets"
	"github.com/mochi-mqtt/server/v2/system"
	bolt "go.etcd.io/bbolt"
)

// sessionStore is the demo brokers' mochi storage hook: it keeps clients,
// subscriptions, in-flight messages, retained messages and $SYS info in a
// bbolt file, one bbolt write transaction (and so one fsync) per change,
// made before the hook returns. It handles the same events as mochi's
// pebble hook, written the same way, and stores the same storage types.
//
// What mochi needs from a storage hook, learned building this one:
//   - mochi restores a session only from what the Stored* methods return
//     when Serve starts (after Init): clients first, then their
//     subscriptions, in-flight messages and retained messages. An
//     in-flight message of a client that is not returned is dropped.
//   - A restored in-flight message needs its packet id. mochi's own bolt
//     hook does not store it (storage.Message.PacketID stays 0), and a
//     client that resumes such a session fails with "missing packet id".
//     Here the id is stored and is part of the message's key.
//   - OnQosPublish comes for every send and resend of a QoS 1/2 message
//     (a resend carries DUP=1), OnQosComplete on its PUBACK, OnQosDropped
//     when mochi gives it up. mochi also keeps its own PUBACK to a QoS 1
//     publisher in flight for a moment (OnQosPublish, then OnQosComplete),
//     after the PUBACK is written. Every event runs on the goroutine of the
//     client whose packet caused it (a publisher's, for the sends to its
//     subscribers), so a synchronous write delays that client.
//   - mochi resends a restored session's in-flight messages sorted by the
//     16 low bits of their Created time, in seconds: see inOrder.
//   - At Serve, mochi calls OnDisconnect for every restored client (it
//     restores them as disconnected), so each start rewrites the clients.
//   - mochi's hook events return no error: a failed write can only be
//     logged. Stop is called once, from Server.Close, after the listeners
//     and their clients are closed.
type sessionStore struct {
	mochi.HookBase
	db *bolt.DB
}

// sessionStoreOptions configures a sessionStore.
type sessionStoreOptions struct {
	// Dir is the directory of the store's file; it is created if absent.
	Dir string
}

// sessionFile is the store's file in its directory.
const sessionFile = "sessions.db"

// The store's buckets, one per kind of record.
var (
	clientsBucket  = []byte("clients")
	subsBucket     = []byte("subscriptions")
	inflightBucket = []byte("inflight")
	retainedBucket = []byte("retained")
	sysInfoBucket  = []byte("sysinfo")
	sysInfoKey     = []byte("info")
	buckets        = [][]byte{clientsBucket, subsBucket, inflightBucket, retainedBucket, sysInfoBucket}
)

// ID names the hook in mochi's logs.
func (s *sessionStore) ID() string { return "demo-session-store" }

// Provides lists the events and reads the hook handles: those of mochi's
// pebble hook.
func (s *sessionStore) Provides(b byte) bool {
	return bytes.Contains([]byte{
		mochi.OnSessionEstablished,
		mochi.OnDisconnect,
		mochi.OnSubscribed,
		mochi.OnUnsubscribed,
		mochi.OnRetainMessage,
		mochi.OnWillSent,
		mochi.OnQosPublish,
		mochi.OnQosComplete,
		mochi.OnQosDropped,
		mochi.OnSysInfoTick,
		mochi.OnClientExpired,
		mochi.OnRetainedExpired,
		mochi.StoredClients,
		mochi.StoredInflightMessages,
		mochi.StoredRetainedMessages,
		mochi.StoredSubscriptions,
		mochi.StoredSysInfo,
	}, []byte{b})
}

// Init opens (or creates) the store in the configured directory.
func (s *sessionStore) Init(config any) error {
	opts, ok := config.(*sessionStoreOptions)
	if !ok || opts.Dir == "" {
		return fmt.Errorf("session store: want *sessionStoreOptions with a directory, got %T", config)
	}
	db, err := openSessionDB(opts.Dir, false)
	if err != nil {
		return err
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		for _, b := range buckets {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		db.Close()
		return fmt.Errorf("session store %s: %w", opts.Dir, err)
	}
	s.db = db
	return nil
}

// openSessionDB opens the store file in dir. bbolt locks the file, so a
// second open waits; it gives up after a second rather than hang.
func openSessionDB(dir string, readOnly bool) (*bolt.DB, error) {
	if !readOnly {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("session store: %w", err)
		}
	}
	path := filepath.Join(dir, sessionFile)
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second, ReadOnly: readOnly})
	if err != nil {
		return nil, fmt.Errorf("session store %s: %w", path, err)
	}
	return db, nil
}

// Stop closes the store.
func (s *sessionStore) Stop() error {
	if s.db == nil {
		return nil
	}
	return s.db.Close()
}

// OnSessionEstablished stores the client whose session just started.
func (s *sessionStore) OnSessionEstablished(cl *mochi.Client, _ packets.Packet) { s.putClient(cl) }

// OnWillSent stores the client again: its will is gone.
func (s *sessionStore) OnWillSent(cl *mochi.Client, _ packets.Packet) { s.putClient(cl) }

// OnDisconnect stores the client, and deletes it when its session ended
// with the connection, unless another connection took the session over.
func (s *sessionStore) OnDisconnect(cl *mochi.Client, _ error, expire bool) {
	s.putClient(cl)
	if expire && !errors.Is(cl.StopCause(), packets.ErrSessionTakenOver) {
		s.del(clientsBucket, []byte(cl.ID))
	}
}

// OnClientExpired deletes a client whose session expired.
func (s *sessionStore) OnClientExpired(cl *mochi.Client) { s.del(clientsBucket, []byte(cl.ID)) }

func (s *sessionStore) putClient(cl *mochi.Client) {
	props := cl.Properties.Props.Copy(false)
	s.put(clientsBucket, []byte(cl.ID), &storage.Client{
		ID:              cl.ID,
		T:               storage.ClientKey,
		Remote:          cl.Net.Remote,
		Listener:        cl.Net.Listener,
		Username:        cl.Properties.Username,
		Clean:           cl.Properties.Clean,
		ProtocolVersion: cl.Properties.ProtocolVersion,
		Properties: storage.ClientProperties{
			SessionExpiryInterval: props.SessionExpiryInterval,
			AuthenticationMethod:  props.AuthenticationMethod,
			AuthenticationData:    props.AuthenticationData,
			RequestProblemInfo:    props.RequestProblemInfo,
			RequestResponseInfo:   props.RequestResponseInfo,
			ReceiveMaximum:        props.ReceiveMaximum,
			TopicAliasMaximum:     props.TopicAliasMaximum,
			User:                  props.User,
			MaximumPacketSize:     props.MaximumPacketSize,
		},
		Will: storage.ClientWill(cl.Properties.Will),
	})
}

// OnSubscribed stores the client's new subscriptions with the QoS granted.
func (s *sessionStore) OnSubscribed(cl *mochi.Client, pk packets.Packet, reasonCodes []byte) {
	for i, f := range pk.Filters {
		s.put(subsBucket, clientKey(cl.ID, f.Filter), &storage.Subscription{
			ID:                cl.ID + ":" + f.Filter,
			T:                 storage.SubscriptionKey,
			Client:            cl.ID,
			Qos:               reasonCodes[i],
			Filter:            f.Filter,
			Identifier:        f.Identifier,
			NoLocal:           f.NoLocal,
			RetainHandling:    f.RetainHandling,
			RetainAsPublished: f.RetainAsPublished,
		})
	}
}

// OnUnsubscribed deletes the client's subscriptions to pk's filters.
func (s *sessionStore) OnUnsubscribed(cl *mochi.Client, pk packets.Packet) {
	for _, f := range pk.Filters {
		s.del(subsBucket, clientKey(cl.ID, f.Filter))
	}
}

// OnQosPublish stores a message in flight to cl, with its packet id.
func (s *sessionStore) OnQosPublish(cl *mochi.Client, pk packets.Packet, sent int64, _ int) {
	m := message(pk, storage.InflightKey, cl.ID+":"+pk.FormatID())
	m.Client, m.PacketID, m.Sent = cl.ID, pk.PacketID, sent
	s.put(inflightBucket, inflightKey(cl.ID, pk.PacketID), m)
}

// OnQosComplete deletes a message cl acknowledged.
func (s *sessionStore) OnQosComplete(cl *mochi.Client, pk packets.Packet) {
	s.del(inflightBucket, inflightKey(cl.ID, pk.PacketID))
}

// OnQosDropped deletes a message mochi gave up sending to cl.
func (s *sessionStore) OnQosDropped(cl *mochi.Client, pk packets.Packet) { s.OnQosComplete(cl, pk) }

// OnRetainMessage stores pk as its topic's retained message, or deletes
// the topic's retained message when r is -1.
func (s *sessionStore) OnRetainMessage(cl *mochi.Client, pk packets.Packet, r int64) {
	if r == -1 {
		s.del(retainedBucket, []byte(pk.TopicName))
		return
	}
	m := message(pk, storage.RetainedKey, pk.TopicName)
	m.Client = cl.ID
	s.put(retainedBucket, []byte(pk.TopicName), m)
}

// OnRetainedExpired deletes an expired retained message.
func (s *sessionStore) OnRetainedExpired(topic string) { s.del(retainedBucket, []byte(topic)) }

// OnSysInfoTick stores the server's latest $SYS counters.
func (s *sessionStore) OnSysInfoTick(sys *system.Info) {
	s.put(sysInfoBucket, sysInfoKey, &storage.SystemInfo{ID: storage.SysInfoKey, T: storage.SysInfoKey, Info: *sys.Clone()})
}

// message is pk in mochi's storage form.
func message(pk packets.Packet, kind, id string) *storage.Message {
	props := pk.Properties.Copy(false)
	return &storage.Message{
		ID:          id,
		T:           kind,
		Origin:      pk.Origin,
		FixedHeader: pk.FixedHeader,
		TopicName:   pk.TopicName,
		Payload:     pk.Payload,
		Created:     pk.Created,
		Properties: storage.MessageProperties{
			PayloadFormat:          props.PayloadFormat,
			MessageExpiryInterval:  props.MessageExpiryInterval,
			ContentType:            props.ContentType,
			ResponseTopic:          props.ResponseTopic,
			CorrelationData:        props.CorrelationData,
			SubscriptionIdentifier: props.SubscriptionIdentifier,
			TopicAlias:             props.TopicAlias,
			User:                   props.User,
		},
	}
}

// clientKey is the key of a client's record named name: the client id,
// length-prefixed so that no two (client, name) pairs share a key.
func clientKey(client, name string) []byte {
	k := binary.AppendUvarint(nil, uint64(len(client)))
	return append(append(k, client...), name...)
}

// inflightKey is the key of the message in flight to client with packet id.
func inflightKey(client string, id uint16) []byte {
	return binary.BigEndian.AppendUint16(clientKey(client, ""), id)
}

// put writes v under key in bucket, synced to disk before it returns.
func (s *sessionStore) put(bucket, key []byte, v encoding.BinaryMarshaler) {
	data, err := v.MarshalBinary()
	if err == nil {
		err = s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucket).Put(key, data) })
	}
	if err != nil {
		s.Log.Error("session store: write failed", "bucket", string(bucket), "error", err)
	}
}

// del deletes key from bucket, synced to disk before it returns.
func (s *sessionStore) del(bucket, key []byte) {
	if err := s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucket).Delete(key) }); err != nil {
		s.Log.Error("session store: delete failed", "bucket", string(bucket), "error", err)
	}
}

// StoredClients returns the stored clients.
func (s *sessionStore) StoredClients() ([]storage.Client, error) {
	return scan[storage.Client](s.db, clientsBucket)
}

// StoredSubscriptions returns the stored subscriptions.
func (s *sessionStore) StoredSubscriptions() ([]storage.Subscription, error) {
	return scan[storage.Subscription](s.db, subsBucket)
}

// StoredInflightMessages returns the stored in-flight messages, each
// client's in packet id order, which is the order they were sent in (mochi
// numbers a client's packets upwards; a demo session never wraps them),
// with Created renumbered so that mochi resends them in that order
// (inOrder).
func (s *sessionStore) StoredInflightMessages() ([]storage.Message, error) {
	msgs, err := scan[storage.Message](s.db, inflightBucket)
	inOrder(msgs)
	return msgs, err
}

// inOrder renumbers the Created of each client's messages, given in the
// order they were sent, so that mochi resends them in that order, as MQTT
// requires (MQTT 5 §4.6, 3.1.1 §4.6). mochi sorts a session's in-flight
// messages by uint16(Created) before resending them, with an unstable sort,
// and Created is in seconds: messages sent within one second would come
// back in any order (a Sparkplug NDATA before its NBIRTH, which a host must
// hold). Each client's messages take the seconds from its oldest's, its 16
// low bits cleared, upwards: at most 18 hours earlier, within mochi's
// default maximum message expiry of 24 hours.
func inOrder(msgs []storage.Message) {
	base := map[string]int64{}
	next := map[string]int64{}
	for _, m := range msgs {
		if b, ok := base[m.Client]; !ok || m.Created < b {
			base[m.Client] = m.Created
		}
	}
	for i := range msgs {
		c := msgs[i].Client
		msgs[i].Created = base[c]&^0xffff + next[c]
		next[c]++
	}
}

// StoredRetainedMessages returns the stored retained messages.
func (s *sessionStore) StoredRetainedMessages() ([]storage.Message, error) {
	return scan[storage.Message](s.db, retainedBucket)
}

// StoredSysInfo returns the stored $SYS counters, zero when none are.
func (s *sessionStore) StoredSysInfo() (storage.SystemInfo, error) {
	var v storage.SystemInfo
	err := s.db.View(func(tx *bolt.Tx) error {
		if data := tx.Bucket(sysInfoBucket).Get(sysInfoKey); data != nil {
			return v.UnmarshalBinary(data)
		}
		return nil
	})
	return v, err
}

// scan decodes every value in bucket. Unlike mochi's hooks it fails on a
// value that does not decode: a session silently left out would lose the
// replays the demo is about.
func scan[T any, P interface {
	*T
	UnmarshalBinary([]byte) error
}](db *bolt.DB, bucket []byte) ([]T, error) {
	var out []T
	err := db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucket)
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, data []byte) error {
			var v T
			if err := P(&v).UnmarshalBinary(data); err != nil {
				return fmt.Errorf("session store: %s %q: %w", bucket, k, err)
			}
			out = append(out, v)
			return nil
		})
	})
	return out, err
}

// inflightBySession counts the in-flight messages of each client session in
// the store in dir, which no broker may have open.
func inflightBySession(dir string) (map[string]int, error) {
	db, err := openSessionDB(dir, true)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	msgs, err := scan[storage.Message](db, inflightBucket)
	if err != nil {
		return nil, err
	}
	n := map[string]int{}
	for _, m := range msgs {
		n[m.Client]++
	}
	return n, nil
}
