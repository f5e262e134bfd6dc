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

// LiveConfig is the configuration a store opened with: the live stream's.
func LiveConfig(s Store) Settings { return s.(*store).cfg.Settings }
