// Package config reads replayguard's YAML configuration into plain structs,
// one per component, and checks it.
//
// # Loading
//
// Load (or Parse, for data already read) goes through these steps:
//
//  1. Interpolation in the values (and keys) of the file: ${VAR} takes the
//     value of an environment variable, ${VAR:-default} takes default when
//     VAR is unset or empty, and $$ is a literal $. A variable that is unset
//     and has no default is an error naming it and its line. Comments, full
//     line or trailing, are left alone: a reference there is never looked
//     up. A value is always the variable's string, byte for byte, never YAML:
//     an unquoted reference whose value would read otherwise (it starts with
//     * & ! | > @ % ` { [ - ? : or a quote, holds ": " or " #", has spaces
//     around it, or reads as null) is written double-quoted; inside double
//     quotes the value is escaped, inside single quotes ' is doubled. So a
//     value never adds structure (write a list as [${A}, ${B}]), and an
//     empty one leaves its setting unset. A line break in an unquoted
//     reference's value (a secret file written with echo ends in one), or a
//     line break or control character in a single-quoted or block scalar,
//     is an error that says to double-quote the reference.
//  2. Strict parsing: an unknown key anywhere, a value of the wrong type, an
//     empty list item, a duration without a unit ("90" rather than "90s") or
//     a malformed size is reported with its line.
//  3. Environment overrides (below), which win over the file.
//  4. Defaults (SetDefaults): every field left at its zero value takes the
//     default its doc comment states. A zero written explicitly in the file
//     for such a field (ttl: 0s, batch_size: 0, ...) is refused rather than
//     silently replaced; http.listen: "" means off.
//  5. Validation (Validate): every problem is collected into one
//     *ValidationError, each naming the file, the line, the route (index and
//     name) and the setting, and saying what to write instead.
//
// ValidateRun adds what replayguard run needs on top: a fixed MQTT client id
// (a persistent session is lost with an empty or generated one) and at
// least one route. LoadRun (or ParseRun) is Load with those checks too,
// their problems listed with the file's and given their lines. Warnings
// lists valid settings that risk losing or doubling messages. Marshal
// writes the effective configuration, defaults included, for replayguard
// config print; Parse reads it back unchanged but for the secrets it
// redacts.
//
// # Environment overrides
//
// These variables replace a setting of the file; an empty value counts as
// unset, and REPLAYGUARD_MQTT_BROKERS that names no broker (" " or ",") is
// refused. A problem with an overridden setting names the variable.
//
//	REPLAYGUARD_STORE_KIND        store.kind
//	REPLAYGUARD_STORE_PATH        store.path
//	REPLAYGUARD_STORE_URL         store.url
//	REPLAYGUARD_MQTT_BROKERS      mqtt.brokers, comma-separated
//	REPLAYGUARD_MQTT_CLIENT_ID    mqtt.client_id
//	REPLAYGUARD_MQTT_SHARE_GROUP  mqtt.share_group
//	REPLAYGUARD_MQTT_USERNAME     mqtt.username
//	REPLAYGUARD_HTTP_LISTEN       http.listen
//
// # Secrets
//
// The configuration names the environment variable or file that carries a
// password or token, and this package reads neither. Store and broker URLs
// are redacted by Marshal and in messages; Marshal also redacts the token
// of a webhook or NATS URL and the value of every audit sink header.
//
// # Paths and templates
//
// ParsePath and ParseTemplate read the payload paths ("a.b.c", "topic[1]")
// and entity templates ("meter/{topic[1]}") that routes use;
// ValidateTopicFilter checks an MQTT topic filter.
//
// # Concurrency
//
// A Config is plain data: read it from any number of goroutines, change it
// from one. The package keeps no state of its own.
package config
