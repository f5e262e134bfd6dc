package events

import (
	"github.com/weft-dev/weft/internal/eventlog"
)

// LiveConfig is the configuration a store opened with: the live stream's.
func LiveConfig(s Store) eventlog.Settings { return s.(*store).cfg.Settings }
