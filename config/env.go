package config

import "strings"

// Environment variables that override settings of the file. An empty value
// counts as unset; a list of brokers that names none is refused.
const (
	EnvStoreKind      = "REPLAYGUARD_STORE_KIND"
	EnvStorePath      = "REPLAYGUARD_STORE_PATH"
	EnvStoreURL       = "REPLAYGUARD_STORE_URL"
	EnvStoreMember    = "REPLAYGUARD_STORE_MEMBER"
	EnvMQTTBrokers    = "REPLAYGUARD_MQTT_BROKERS" // comma-separated
	EnvMQTTClientID   = "REPLAYGUARD_MQTT_CLIENT_ID"
	EnvMQTTShareGroup = "REPLAYGUARD_MQTT_SHARE_GROUP"
	EnvMQTTUsername   = "REPLAYGUARD_MQTT_USERNAME"
	EnvMQTTProtocol   = "REPLAYGUARD_MQTT_PROTOCOL" // 5, 3.1.1 or auto
	EnvHTTPListen     = "REPLAYGUARD_HTTP_LISTEN"
	EnvInput          = "REPLAYGUARD_INPUT" // mqtt or jetstream

	EnvJetStreamURL      = "REPLAYGUARD_JETSTREAM_URL"
	EnvJetStreamStream   = "REPLAYGUARD_JETSTREAM_STREAM"
	EnvJetStreamConsumer = "REPLAYGUARD_JETSTREAM_CONSUMER"
)

// applyEnv overrides settings from the environment and returns which
// setting each variable replaced.
func (c *Config) applyEnv(getenv func(string) (string, bool)) map[string]string {
	set := map[string]string{}
	str := func(key, env string, dst *string) {
		if v, ok := getenv(env); ok && v != "" {
			*dst = v
			set[key] = env
		}
	}
	str("store.kind", EnvStoreKind, &c.Store.Kind)
	str("store.path", EnvStorePath, &c.Store.Path)
	str("store.url", EnvStoreURL, &c.Store.URL)
	str("store.member", EnvStoreMember, &c.Store.Member)
	str("mqtt.client_id", EnvMQTTClientID, &c.MQTT.ClientID)
	str("mqtt.share_group", EnvMQTTShareGroup, &c.MQTT.ShareGroup)
	str("mqtt.username", EnvMQTTUsername, &c.MQTT.Username)
	str("mqtt.protocol", EnvMQTTProtocol, &c.MQTT.Protocol)
	str("http.listen", EnvHTTPListen, &c.HTTP.Listen)
	str("input", EnvInput, &c.Input)
	c.applyJetStreamEnv(set, str)
	var brokers string
	str("mqtt.brokers", EnvMQTTBrokers, &brokers)
	if brokers != "" {
		c.MQTT.Brokers = nil
		for _, b := range strings.Split(brokers, ",") {
			if b = strings.TrimSpace(b); b != "" {
				c.MQTT.Brokers = append(c.MQTT.Brokers, b)
			}
		}
	}
	return set
}

// applyJetStreamEnv overrides the jetstream section, creating it when a
// variable sets one of its settings.
func (c *Config) applyJetStreamEnv(set map[string]string, str func(key, env string, dst *string)) {
	j := c.JetStream
	if j == nil {
		j = &JetStreamConfig{}
	}
	n := len(set)
	str("jetstream.url", EnvJetStreamURL, &j.URL)
	str("jetstream.stream", EnvJetStreamStream, &j.Stream)
	str("jetstream.consumer", EnvJetStreamConsumer, &j.Consumer)
	if c.JetStream == nil && len(set) > n {
		c.JetStream = j
	}
}
