// Go's time.Duration: parsing ("1m30s", "250ms") and its String form, which
// graphs record in their canonical JSON and failure messages quote.

const units: Record<string, bigint> = {
  ns: 1n,
  us: 1000n,
  'µs': 1000n, // U+00B5
  'μs': 1000n, // U+03BC
  ms: 1000_000n,
  s: 1000_000_000n,
  m: 60n * 1000_000_000n,
  h: 3600n * 1000_000_000n,
}

const maxDuration = (1n << 63n) - 1n

/** parseDuration parses a Go duration string into nanoseconds, as time.ParseDuration. */
export function parseDuration(s: string): bigint {
  const orig = s
  const bad = () => new Error(`time: invalid duration ${JSON.stringify(orig)}`)
  let neg = false
  if (s !== '' && (s[0] === '-' || s[0] === '+')) {
    neg = s[0] === '-'
    s = s.slice(1)
  }
  if (s === '0') return 0n
  if (s === '') throw bad()
  let d = 0n
  while (s !== '') {
    const m = /^([0-9]*)(\.([0-9]*))?/.exec(s)
    if (m === null) throw bad()
    const whole = m[1] ?? ''
    const frac = m[3] ?? ''
    if (whole === '' && frac === '') throw bad()
    s = s.slice(m[0].length)
    const um = /^[^0-9.]+/.exec(s)
    if (um === null) throw new Error(`time: missing unit in duration ${JSON.stringify(orig)}`)
    const unit = units[um[0]]
    if (unit === undefined) throw new Error(`time: unknown unit ${JSON.stringify(um[0])} in duration ${JSON.stringify(orig)}`)
    s = s.slice(um[0].length)
    let v = BigInt(whole === '' ? '0' : whole) * unit
    if (frac !== '') {
      // Go keeps the fraction's digits as far as they matter and truncates.
      let scale = 1n
      let f = 0n
      for (const ch of frac) {
        if (scale > 10n ** 18n) break
        f = f * 10n + BigInt(ch)
        scale *= 10n
      }
      v += (f * unit) / scale
    }
    d += v
    if (d > maxDuration + (neg ? 1n : 0n)) throw bad()
  }
  return neg ? -d : d
}

/** formatDuration writes nanoseconds as Go's Duration.String does ("1m30s", "1.5s", "0s"). */
export function formatDuration(ns: bigint): string {
  if (ns === 0n) return '0s'
  const neg = ns < 0n
  let u = neg ? -ns : ns
  let out: string
  if (u < 1000_000_000n) {
    // Under a second: the largest unit below it that fits, with a fraction.
    let prec: number
    let unit: string
    if (u < 1000n) {
      return (neg ? '-' : '') + u.toString() + 'ns'
    } else if (u < 1000_000n) {
      prec = 3
      unit = 'µs'
    } else {
      prec = 6
      unit = 'ms'
    }
    out = fmtFrac(u, prec) + unit
  } else {
    const secs = fmtFrac(u, 9)
    u /= 1000_000_000n
    const whole = u
    const [intSecs, fracPart] = secs.split('.') as [string, string | undefined]
    void intSecs
    const s = (whole % 60n).toString() + (fracPart !== undefined ? '.' + fracPart : '')
    out = s + 's'
    const mins = whole / 60n
    if (mins > 0n) {
      out = (mins % 60n).toString() + 'm' + out
      const hours = mins / 60n
      if (hours > 0n) out = hours.toString() + 'h' + out
    }
  }
  return (neg ? '-' : '') + out
}

// fmtFrac writes v / 10^prec with the fraction's trailing zeros removed.
function fmtFrac(v: bigint, prec: number): string {
  const scale = 10n ** BigInt(prec)
  const whole = v / scale
  let frac = (v % scale).toString().padStart(prec, '0').replace(/0+$/, '')
  return whole.toString() + (frac !== '' ? '.' + frac : '')
}

/** durationMs formats milliseconds as a Go duration string. */
export function formatMs(ms: number): string {
  return formatDuration(BigInt(Math.round(ms)) * 1000_000n)
}
