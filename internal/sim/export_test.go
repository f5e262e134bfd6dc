package sim

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
)

// logDigest hashes a simulation's log: subjects, headers, data and times.
func logDigest(s *Sim) string {
	h := sha256.New()
	for _, m := range s.log.msgs {
		keys := make([]string, 0, len(m.header))
		for k := range m.header {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		fmt.Fprintf(h, "%d %s %v\n", m.seq, m.subject, m.stored.UnixNano())
		for _, k := range keys {
			fmt.Fprintf(h, "%s=%v\n", k, m.header[k])
		}
		h.Write(m.data)
	}
	return hex.EncodeToString(h.Sum(nil))
}
