// YAML as the Go engine reads it (pkg/graph uses sigs.k8s.io/yaml, which
// decodes with go-yaml v2, YAML 1.1, into Go values and writes those as
// JSON). The YAML library parses the text; the scalars are resolved here by
// go-yaml v2's rules (resolve.go) so that a graph file gives the same JSON,
// and so the same canonical graph and digest, in both languages:
// yes/no/on/off and y/n are booleans, 0755 is octal, 0x1f hex, 0b101
// binary, 1_000 a thousand, timestamps stay strings, quoted and block
// scalars are strings; map keys become strings; merge keys (<<) merge.

import { Alias, isAlias, isMap, isScalar, isSeq, type Node, parseAllDocuments, Scalar, type Document } from 'yaml'
import { compareUTF8, formatFloat, type JValue } from '../internal/gojson.js'

/** YAMLError is YAML the engine would not read. */
export class YAMLError extends Error {
  override name = 'YAMLError'
}

const boolTrue = new Set(['y', 'Y', 'yes', 'Yes', 'YES', 'true', 'True', 'TRUE', 'on', 'On', 'ON'])
const boolFalse = new Set(['n', 'N', 'no', 'No', 'NO', 'false', 'False', 'FALSE', 'off', 'Off', 'OFF'])
const nulls = new Set(['', '~', 'null', 'Null', 'NULL'])
const nans = new Set(['.nan', '.NaN', '.NAN'])
const infs = new Set(['.inf', '.Inf', '.INF', '+.inf', '+.Inf', '+.INF'])
const ninfs = new Set(['-.inf', '-.Inf', '-.INF'])
const yamlStyleFloat = /^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$/

type Resolved = { kind: 'null' } | { kind: 'bool'; value: boolean } | { kind: 'int'; value: bigint } | { kind: 'float'; value: number } | { kind: 'string'; value: string }

const int64Min = -(1n << 63n)
const int64Max = (1n << 63n) - 1n
const uint64Max = (1n << 64n) - 1n

// goParseInt is strconv.ParseInt(s, 0, 64) (or ParseUint): undefined on error.
function goParseInt(s: string, signed: boolean): bigint | undefined {
  let neg = false
  let t = s
  if (t.startsWith('+') || t.startsWith('-')) {
    if (!signed) return undefined
    neg = t[0] === '-'
    t = t.slice(1)
  }
  let digits: string
  let base: number
  if (/^0[xX]/.test(t)) {
    base = 16
    digits = t.slice(2)
  } else if (/^0[bB]/.test(t)) {
    base = 2
    digits = t.slice(2)
  } else if (/^0[oO]/.test(t)) {
    base = 8
    digits = t.slice(2)
  } else if (t.length > 1 && t[0] === '0') {
    base = 8
    digits = t.slice(1)
  } else {
    base = 10
    digits = t
  }
  const valid = { 2: /^[01]+$/, 8: /^[0-7]+$/, 10: /^[0-9]+$/, 16: /^[0-9a-fA-F]+$/ }[base as 2 | 8 | 10 | 16]
  if (!valid.test(digits)) return undefined
  let v = 0n
  for (const c of digits) v = v * BigInt(base) + BigInt(parseInt(c, base))
  if (neg) v = -v
  if (signed ? v < int64Min || v > int64Max : v > uint64Max) return undefined
  return v
}

// goParseFloat is strconv.ParseFloat(s, 64) for decimal forms: undefined on error (out of range included).
function goParseFloat(s: string): number | undefined {
  if (!/^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$/.test(s)) return undefined
  const f = Number(s)
  return Number.isFinite(f) ? f : undefined
}

/** resolvePlain resolves a plain scalar as go-yaml v2 does. */
export function resolvePlain(s: string): Resolved {
  if (nulls.has(s)) return { kind: 'null' }
  const c = s[0] ?? ''
  const hint = c === '+' || c === '-' ? 'S' : c >= '0' && c <= '9' ? 'D' : 'yYnNtTfFoO~'.includes(c) ? 'M' : c === '.' ? '.' : ''
  if (hint === '') return { kind: 'string', value: s }
  if (boolTrue.has(s)) return { kind: 'bool', value: true }
  if (boolFalse.has(s)) return { kind: 'bool', value: false }
  if (nans.has(s)) return { kind: 'float', value: NaN }
  if (infs.has(s)) return { kind: 'float', value: Infinity }
  if (ninfs.has(s)) return { kind: 'float', value: -Infinity }
  if (hint === '.') {
    const f = goParseFloat(s)
    return f !== undefined ? { kind: 'float', value: f } : { kind: 'string', value: s }
  }
  if (hint === 'M') return { kind: 'string', value: s }
  const plain = s.replaceAll('_', '')
  let v = goParseInt(plain, true) ?? goParseInt(plain, false)
  if (v !== undefined) return { kind: 'int', value: v }
  if (yamlStyleFloat.test(plain)) {
    const f = goParseFloat(plain)
    if (f !== undefined) return { kind: 'float', value: f }
  }
  if (plain.startsWith('0b')) {
    v = binary(plain.slice(2), int64Max) ?? binary(plain.slice(2), uint64Max)
    if (v !== undefined) return { kind: 'int', value: v }
  } else if (plain.startsWith('-0b')) {
    const b = binary(plain.slice(3), -int64Min)
    if (b !== undefined) return { kind: 'int', value: -b }
  }
  return { kind: 'string', value: s }
}

function binary(d: string, max: bigint): bigint | undefined {
  if (!/^[01]+$/.test(d)) return undefined
  const v = BigInt('0b' + d)
  return v <= max ? v : undefined
}

// formatKeyFloat is strconv.FormatFloat(f, 'g', -1, 32), as sigs.k8s.io/yaml writes a float map key.
function formatKeyFloat(f: number): string {
  if (Number.isNaN(f)) return '.nan'
  if (f === Infinity) return '.inf'
  if (f === -Infinity) return '-.inf'
  const x = Math.fround(f)
  if (x === 0) return Object.is(x, -0) ? '-0' : '0'
  let digits = ''
  let exp = 0
  for (let p = 1; p <= 9; p++) {
    const e = x.toExponential(p - 1) // d.ddde±x
    if (Math.fround(Number(e)) === x) {
      const [m, ex] = e.split('e') as [string, string]
      digits = m.replace('-', '').replace('.', '')
      exp = Number(ex)
      break
    }
  }
  const neg = x < 0 ? '-' : ''
  if (exp < -4 || exp >= 6) {
    const mant = digits.length > 1 ? digits[0] + '.' + digits.slice(1) : digits
    const ae = Math.abs(exp)
    return `${neg}${mant}e${exp < 0 ? '-' : '+'}${ae < 10 ? '0' : ''}${ae}`
  }
  if (exp < 0) return `${neg}0.${'0'.repeat(-exp - 1)}${digits}`
  const whole = digits.slice(0, exp + 1).padEnd(exp + 1, '0')
  const frac = digits.slice(exp + 1)
  return neg + whole + (frac !== '' ? '.' + frac : '')
}

const strTag = 'tag:yaml.org,2002:str'
const knownTags = new Set(['tag:yaml.org,2002:bool', 'tag:yaml.org,2002:int', 'tag:yaml.org,2002:float', 'tag:yaml.org,2002:null', 'tag:yaml.org,2002:timestamp'])

class Converter {
  private depth = 0
  constructor(private doc: Document) {}

  scalar(n: Scalar): Resolved {
    const s = String(n.source ?? n.value ?? '')
    const tag = n.tag
    if (tag === strTag || tag === 'tag:yaml.org,2002:binary') return { kind: 'string', value: s }
    const plain = n.type === Scalar.PLAIN || n.type === undefined
    if (tag !== undefined && tag !== '' && !knownTags.has(tag) && tag !== '!') return { kind: 'string', value: s }
    if (!plain && (tag === undefined || tag === '' || tag === '!')) return { kind: 'string', value: s }
    const r = resolvePlain(s)
    if (tag === 'tag:yaml.org,2002:float' && r.kind === 'int') return { kind: 'float', value: Number(r.value) }
    const want = tag?.slice('tag:yaml.org,2002:'.length)
    if (want !== undefined && want !== '' && want !== 'timestamp' && r.kind !== want) {
      throw new YAMLError(`cannot decode !!${r.kind === 'string' ? 'str' : r.kind} \`${s}\` as a !!${want}`)
    }
    return r
  }

  value(n: Node | null | undefined): JValue {
    if (n === null || n === undefined) return { kind: 'null' }
    if (++this.depth > 10000) throw new YAMLError('document nested too deeply')
    try {
      if (isAlias(n)) return this.value((n as Alias).resolve(this.doc) as Node | undefined)
      if (isScalar(n)) return jvalue(this.scalar(n))
      if (isSeq(n)) return { kind: 'array', items: n.items.map((i) => this.value(i as Node)) }
      if (isMap(n)) {
        const members = new Map<string, JValue>()
        for (const pair of n.items) {
          const k = pair.key as Node | null
          if (k !== null && isScalar(k) && k.source === '<<' && k.type === Scalar.PLAIN) {
            this.merge(pair.value as Node | null, members)
            continue
          }
          const key = this.key(k)
          members.delete(key) // the last value wins, where the key first stood
          members.set(key, this.value(pair.value as Node | null))
        }
        // Go writes the map it decoded as JSON: keys in byte order.
        return { kind: 'object', members: [...members].sort((a, b) => compareUTF8(a[0], b[0])) }
      }
      throw new YAMLError('unsupported YAML node')
    } finally {
      this.depth--
    }
  }

  private merge(n: Node | null, into: Map<string, JValue>): void {
    const target = n !== null && isAlias(n) ? ((n as Alias).resolve(this.doc) as Node | undefined) : n
    if (target !== undefined && target !== null && isSeq(target)) {
      for (const i of target.items) this.merge(i as Node, into)
      return
    }
    const v = this.value(target)
    if (v.kind !== 'object') throw new YAMLError('map merge requires map or sequence of maps as the value')
    for (const [k, e] of v.members) into.set(k, e)
  }

  private key(k: Node | null): string {
    if (k === null) throw new YAMLError('unsupported map key: null')
    if (isAlias(k)) return this.key((k as Alias).resolve(this.doc) as Node)
    if (!isScalar(k)) throw new YAMLError('invalid map key: a map or a list')
    const r = this.scalar(k)
    switch (r.kind) {
      case 'string':
        return r.value
      case 'int':
        return r.value.toString()
      case 'bool':
        return r.value ? 'true' : 'false'
      case 'float':
        return formatKeyFloat(r.value)
      case 'null':
        throw new YAMLError('unsupported map key: null')
    }
  }
}

function jvalue(r: Resolved): JValue {
  switch (r.kind) {
    case 'null':
      return { kind: 'null' }
    case 'bool':
      return { kind: 'bool', value: r.value }
    case 'string':
      return { kind: 'string', value: r.value }
    case 'int':
      return { kind: 'number', text: r.value.toString() }
    case 'float':
      if (!Number.isFinite(r.value)) throw new YAMLError(`json: unsupported value: ${Number.isNaN(r.value) ? 'NaN' : r.value > 0 ? '+Inf' : '-Inf'}`)
      return { kind: 'number', text: formatFloat(r.value) }
  }
}

/**
 * duplicateKeys lists each mapping key of the first document that is given
 * twice, as Go's loader does (pkg/graph duplicateKeys): YAML read into JSON
 * keeps the last silently, so the first would be ignored without a word.
 * Each is "line L, column C: field "a.b": duplicate key (first given at
 * line L, column C)", keyed by the key's text as written, as go-yaml v3
 * gives it.
 */
export function duplicateKeys(text: string): string[] {
  const docs = parseAllDocuments(text, { schema: 'failsafe', version: '1.1', uniqueKeys: false, merge: false, strict: false, keepSourceTokens: false })
  if (!Array.isArray(docs) || docs[0] === undefined || docs[0].errors.length > 0) return []
  const doc = docs[0]
  const found: string[] = []
  const pos = (offset: number | undefined): [number, number] => {
    const before = text.slice(0, offset ?? 0)
    return [before.split('\n').length, (offset ?? 0) - before.lastIndexOf('\n')]
  }
  const walk = (n: Node | null | undefined, path: string, depth: number): void => {
    if (n === null || n === undefined || depth > 10000) return
    if (isSeq(n)) {
      n.items.forEach((item, i) => walk(item as Node, `${path}[${i}]`, depth + 1))
      return
    }
    if (!isMap(n)) return
    const first = new Map<string, [number, number]>()
    for (const pair of n.items) {
      const k = pair.key as Node | null
      const name = k !== null && isScalar(k) ? String(k.source ?? k.value ?? '') : ''
      const field = path === '' ? name : `${path}.${name}`
      if (k !== null && isScalar(k)) {
        const at = pos(k.range?.[0])
        const was = first.get(name)
        if (was !== undefined) found.push(`line ${at[0]}, column ${at[1]}: field ${JSON.stringify(field)}: duplicate key (first given at line ${was[0]}, column ${was[1]})`)
        else first.set(name, at)
      }
      walk(pair.value as Node | null, field, depth + 1)
    }
  }
  walk(doc.contents as Node | null, '', 0)
  return found
}

/** yamlToJSON reads the first document of YAML text as the JSON value Go's loader sees. */
export function yamlToJSON(text: string): JValue {
  const docs = parseAllDocuments(text, { schema: 'failsafe', version: '1.1', uniqueKeys: false, merge: false, strict: false, prettyErrors: true })
  if (!Array.isArray(docs)) return { kind: 'null' } // only comments
  const doc = docs[0]
  if (doc === undefined) return { kind: 'null' }
  if (doc.errors.length > 0) throw new YAMLError((doc.errors[0] as Error).message.split('\n')[0] ?? 'invalid YAML')
  return new Converter(doc).value(doc.contents as Node | null)
}
