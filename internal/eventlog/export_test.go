package eventlog

import "github.com/nats-io/nats.go"

// The SDK's paths, which the fast codec is held to.
var EncodeSDK = encodeSDK

func DecodeSDK(subject string, hdr nats.Header, data []byte) (*Event, error) {
	return decodeSDK(subject, hdr, data, nil)
}

func DecodeFast(subject string, hdr nats.Header, data []byte) (*Event, bool, error) {
	return decodeFast(subject, hdr, data, nil)
}

// Sealed codecs under keys of a test's own, leaving the process's alone.

func EncodeSealed(e *Event, keys Keys) (*nats.Msg, error) { return encodeFast(e, newSealer(keys)) }

func DecodeSealed(subject string, hdr nats.Header, data []byte, keys Keys) (*Event, error) {
	var s *sealer
	if keys != nil {
		s = newSealer(keys)
	}
	if e, ok, err := decodeFast(subject, hdr, data, s); ok {
		return e, err
	}
	return decodeSDK(subject, hdr, data, s)
}

func DecodeSDKSealed(subject string, hdr nats.Header, data []byte, keys Keys) (*Event, error) {
	return decodeSDK(subject, hdr, data, newSealer(keys))
}

// LiveConfig is the configuration a store opened with: the live stream's.
func LiveConfig(s Store) Settings { return s.(*store).cfg.Settings }
