// Vite builds the UI into the directory the Go server embeds
// (internal/ui/dist, see internal/ui/API.md). `npm run dev` serves the
// sources with hot reload and sends /api to a running `weft ui` (WEFT_UI,
// default http://127.0.0.1:8233).
import { readdirSync, rmSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { defineConfig, type Plugin } from 'vite'

const api = process.env.WEFT_UI ?? 'http://127.0.0.1:8233'
const outDir = resolve(import.meta.dirname, '../internal/ui/dist')

// The build directory holds two files git tracks (README and .gitignore,
// so that go:embed finds the directory before a build). Vite's emptyOutDir
// would remove them; this empties the directory of everything else.
function emptyOutDirKeepingTracked(): Plugin {
  const keep = new Set(['README', '.gitignore'])
  return {
    name: 'weft-empty-out-dir',
    apply: 'build',
    buildStart() {
      let names: string[] = []
      try {
        names = readdirSync(outDir)
      } catch {
        return // not there yet: vite creates it
      }
      for (const n of names) if (!keep.has(n)) rmSync(join(outDir, n), { recursive: true, force: true })
    },
  }
}

export default defineConfig({
  oxc: { jsx: { runtime: 'automatic', importSource: 'preact' } },
  plugins: [emptyOutDirKeepingTracked()],
  build: {
    outDir,
    emptyOutDir: false, // see emptyOutDirKeepingTracked
    chunkSizeWarningLimit: 600,
  },
  server: {
    host: '127.0.0.1',
    proxy: { '/api': { target: api, changeOrigin: true } },
  },
})
