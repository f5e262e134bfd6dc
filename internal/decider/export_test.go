package decider

// SetFullScan makes step look at every node each time (see fullScan), until
// the returned function restores it.
func SetFullScan(on bool) (restore func()) {
	was := fullScan
	fullScan = on
	return func() { fullScan = was }
}
