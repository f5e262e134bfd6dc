package eventlog

// Headers Weft writes beside the CloudEvents attributes.
const (
	// HdrCheckpoint is the header of a decision that records a snapshot's
	// digest (Event.Checkpoint): only decision subjects carry it, so that
	// a snapshot read from anywhere else can be checked against the log.
	HdrCheckpoint = "Weft-Checkpoint"
	// HdrRestored marks a message put back into its run's log from an
	// archive (readmodel.Restore): its value is the message's original stored
	// time (RFC 3339), which events.DecodeStored reads as Event.Stored.
	// Engines pass such messages over: they are history, not news.
	HdrRestored = "Weft-Restored"
)

// HdrType and HdrContentType are the headers of an event's type and of
// its data's content type (ContentSealed when sealed), for readers that
// look at a message before decoding it (the coordinator's turns).
const (
	HdrType        = hdrType
	HdrContentType = hdrContentType
	ContentJSON    = contentJSON
)
