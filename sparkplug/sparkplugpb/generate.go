// Package sparkplugpb holds the Go types of the Sparkplug B payload,
// generated from sparkplug_b.proto, the Eclipse Tahu definition of the
// Eclipse Sparkplug 3.0 payload (EPL-2.0, license header kept in the file).
//
// To regenerate (CI does not run protoc; the generated file is committed):
//
//	apt-get install -y protobuf-compiler   # protoc 3.21 (Debian 12)
//	go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
//	go generate ./sparkplug/sparkplugpb
//
// The .proto is kept byte for byte as Tahu ships it; the Go package is named
// on protoc's command line (the M option), not in the file.
package sparkplugpb

//go:generate protoc --proto_path=. --go_out=. --go_opt=paths=source_relative --go_opt=Msparkplug_b.proto=github.com/replayguard/replayguard/sparkplug/sparkplugpb;sparkplugpb sparkplug_b.proto
