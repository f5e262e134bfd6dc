// Package bench is Weft's benchmark harness (cmd/weftbench, make bench): it
// measures the engine beside the raw JetStream floor of the same message
// pattern, on the same server, in the same run, and reports each figure as
// a ratio to its floor, against the targets of issues 6 and 10.
//
// Run starts (or connects to) one server and runs the figures in order:
// hop latency, throughput, fan-out, replay, memory, scale-out, coordinator
// scale-out and failover (one file each), then hop and throughput again in
// durable mode, on a server of their own that fsyncs every write
// (durable.go), retention, local steps, and the TypeScript worker beside
// the Go worker and a Node floor (typescript.go; it builds sdk/typescript
// through package tsbuild and runs its programs with node), the starts of
// schedules and triggers, and encryption at rest and large payloads
// (sealed.go: the hop sealed against plain, and a 50 MB payload written
// and read back against the raw Object Store). Every figure works on streams of its own, created for it and
// deleted after it, and every component (coordinator, worker, each floor
// role) has a connection of its own, as separate processes would. Times
// are the server's stored message times (message metadata) wherever an
// interval spans two processes, so no client clock is involved. The floor
// of the engine's node pattern is flow (floor.go). The memory figure runs
// the coordinator alone in a child process: this program re-executed with
// WEFTBENCH_CHILD set (runChild). The scale-out figure builds and spawns
// cmd/nodeworker; the coordinator figures build and spawn cmd/coordinator
// and read each process's counters from the line it logs when it stops
// (coordproc.go). bench/README.md says how to read the results.
package bench
