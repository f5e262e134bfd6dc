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

func DecodeSDKSealed(subject string, hdr nats.Header, data []byte, keys Keys) (*Event, error) {
	return decodeSDK(subject, hdr, data, newSealer(keys))
}

// Codec is a codec under keys (nil: plain) with its own cipher cache, as
// the process's is: for benchmarks.
func Codec(keys Keys) (func(*Event) (*nats.Msg, error), func(string, nats.Header, []byte) (*Event, error)) {
	var s *sealer
	if keys != nil {
		s = newSealer(keys)
	}
	return func(e *Event) (*nats.Msg, error) { return encodeFast(e, s) },
		func(subject string, hdr nats.Header, data []byte) (*Event, error) {
			if e, ok, err := decodeFast(subject, hdr, data, s); ok {
				return e, err
			}
			return decodeSDK(subject, hdr, data, s)
		}
}

// LiveConfig is the configuration a store opened with: the live stream's.
func LiveConfig(s Store) Settings { return s.(*store).cfg.Settings }

// SubsetOf is subsetOf: whether every subject filter a matches, b matches.
var SubsetOf = subsetOf
