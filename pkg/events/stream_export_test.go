package events

// LiveConfig is the configuration a store opened with: the live stream's.
func LiveConfig(s Store) Config { return s.(*store).cfg }
