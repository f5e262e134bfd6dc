// A tiny router over the URL: /runs?status=failed, /runs/RUN?at=12&node=b,
// /workers. The URL holds every choice a screen makes, so a link shows what
// its sender saw. The server answers every path outside /api and /assets
// with index.html (internal/ui/API.md), so these links load from anywhere.
import { useEffect, useState } from 'preact/hooks'

export interface Route {
  // path is the URL's path split on '/', decoded: ['runs', 'RUN'].
  path: string[]
  params: URLSearchParams
}

export function parseRoute(pathname: string, search: string): Route {
  const path = pathname
    .split('/')
    .filter((s) => s !== '')
    .map((s) => {
      try {
        return decodeURIComponent(s)
      } catch {
        return s // a malformed escape: the screen says the id is unknown
      }
    })
  return { path, params: new URLSearchParams(search) }
}

const current = () => parseRoute(location.pathname, location.search)

// href builds a link; empty and undefined parameters are left out.
export function href(path: string[], params: Record<string, string | number | undefined | null> = {}): string {
  const q = new URLSearchParams()
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== '') q.set(k, String(v))
  const s = q.toString()
  return '/' + path.map(encodeURIComponent).join('/') + (s ? `?${s}` : '')
}

// navigated is the window event navigate sends.
export const navigated = 'weft:navigate'

// navigate goes to a link of the UI without reloading the page; replace
// keeps the history short while scrubbing.
export function navigate(to: string, replace = false) {
  if (replace) history.replaceState(null, '', to)
  else history.pushState(null, '', to)
  window.dispatchEvent(new Event(navigated))
}

// withParams is the current route's link with some parameters changed
// (null or '' removes one).
export function withParams(route: Route, changes: Record<string, string | number | null | undefined>): string {
  const all: Record<string, string | number | null | undefined> = {}
  route.params.forEach((v, k) => (all[k] = v))
  Object.assign(all, changes)
  return href(route.path, all)
}

// Clicks on the UI's own links navigate in place.
document.addEventListener('click', (e) => {
  if (e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return
  const a = (e.target as Element | null)?.closest?.('a')
  if (!a || a.target || a.hasAttribute('download')) return
  const url = new URL(a.href, location.href)
  if (url.origin !== location.origin || url.pathname.startsWith('/api/')) return
  e.preventDefault()
  navigate(url.pathname + url.search)
})

export function useRoute(): Route {
  const [route, setRoute] = useState(current)
  useEffect(() => {
    const on = () => setRoute(current())
    window.addEventListener(navigated, on)
    window.addEventListener('popstate', on)
    return () => {
      window.removeEventListener(navigated, on)
      window.removeEventListener('popstate', on)
    }
  }, [])
  return route
}
