package eventlog

// The SDK's paths, which the fast codec is held to.
var (
	EncodeSDK  = encodeSDK
	DecodeSDK  = decodeSDK
	DecodeFast = decodeFast
)

// LiveConfig is the configuration a store opened with: the live stream's.
func LiveConfig(s Store) Settings { return s.(*store).cfg.Settings }
