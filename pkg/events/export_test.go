package events

// The SDK's paths, which the fast codec is held to.
var (
	EncodeSDK  = encodeSDK
	DecodeSDK  = decodeSDK
	DecodeFast = decodeFast
)
