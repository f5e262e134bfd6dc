// JSON written the way Go's encoding/json writes it, so that what this SDK
// appends to a run's log has the bytes the Go SDK would write for the same
// values: object keys sorted by their UTF-8 bytes (Go sorts map keys), the
// characters <, >, & and U+2028/U+2029 escaped, control characters as Go
// escapes them, and numbers in Go's float64 format. A value that is not
// JSON (a BigInt, a cycle, NaN, a function, a Map) is refused with the path
// to it, never written as something else.

/** NotJSONError says a value cannot be written as JSON, and where in it. */
export class NotJSONError extends Error {
  override name = 'NotJSONError'
  constructor(
    readonly path: string,
    readonly reason: string,
  ) {
    super(`${path === '' ? 'the value' : path}: ${reason}`)
  }
}

/**
 * RawJSON is JSON text written as it is (compacted, with Go's escaping):
 * what Go's json.RawMessage is.
 */
export class RawJSON {
  constructor(readonly text: string) {}
}

const hex = '0123456789abcdef'

// plainRE matches strings Go writes as they are: printable ASCII
// without '"', '\\', '<', '>' and '&' (most ids, names and keys).
const plainRE = /^[ !#-%'-;=?-[\]-~]*$/

/** quote writes s as a JSON string, as Go's encoder does (HTML-escaped). */
export function quote(s: string): string {
  if (s.length < 256 && plainRE.test(s)) return '"' + s + '"'
  let out = '"'
  let start = 0
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i)
    let esc: string | undefined
    if (c < 0x20) {
      switch (c) {
        case 0x08:
          esc = '\\b'
          break
        case 0x0c:
          esc = '\\f'
          break
        case 0x0a:
          esc = '\\n'
          break
        case 0x0d:
          esc = '\\r'
          break
        case 0x09:
          esc = '\\t'
          break
        default:
          esc = '\\u00' + hex[c >> 4] + hex[c & 0xf]
      }
    } else if (c === 0x22) {
      esc = '\\"'
    } else if (c === 0x5c) {
      esc = '\\\\'
    } else if (c === 0x3c) {
      esc = '\\u003c'
    } else if (c === 0x3e) {
      esc = '\\u003e'
    } else if (c === 0x26) {
      esc = '\\u0026'
    } else if (c === 0x2028) {
      esc = '\\u2028'
    } else if (c === 0x2029) {
      esc = '\\u2029'
    } else if (c >= 0xd800 && c <= 0xdfff) {
      // A lone surrogate is not UTF-8; Go writes invalid UTF-8 as U+FFFD.
      const next = s.charCodeAt(i + 1)
      if (c <= 0xdbff && next >= 0xdc00 && next <= 0xdfff) {
        i++
        continue
      }
      esc = '\ufffd'
    }
    if (esc !== undefined) {
      out += s.slice(start, i) + esc
      start = i + 1
    }
  }
  return out + s.slice(start) + '"'
}

/** formatFloat writes a finite number as Go's encoder writes a float64. */
export function formatFloat(f: number): string {
  if (Object.is(f, -0)) return '-0'
  // JavaScript's shortest round-trip form switches to exponents at the same
  // magnitudes as Go's encoder (below 1e-6, from 1e21 on), and writes the
  // exponent as Go does once Go has trimmed its leading zero ("e-7").
  return String(f)
}

/** compareUTF8 orders strings by their UTF-8 bytes, as Go sorts map keys. */
export function compareUTF8(a: string, b: string): number {
  if (a === b) return 0
  return Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'))
}

function pathKey(path: string, k: string): string {
  return /^[A-Za-z_$][A-Za-z0-9_$]*$/.test(k) ? `${path}.${k}` : `${path}[${JSON.stringify(k)}]`
}

/**
 * marshal writes a JavaScript value as Go's json.Marshal writes the Go value
 * it decodes to (maps with sorted keys). undefined properties are left out,
 * as JSON.stringify leaves them out; undefined in a list is null.
 */
export function marshal(v: unknown, path = ''): string {
  return write(v, path, [])
}

function write(v: unknown, path: string, stack: object[]): string {
  switch (typeof v) {
    case 'string':
      return quote(v)
    case 'boolean':
      return v ? 'true' : 'false'
    case 'number':
      if (!Number.isFinite(v)) throw new NotJSONError(path, `${v} is not a JSON number`)
      return formatFloat(v)
    case 'bigint':
      throw new NotJSONError(path, `a BigInt (${v}n) is not a JSON value (convert it to a number or a string)`)
    case 'undefined':
      return 'null'
    case 'function':
      throw new NotJSONError(path, 'a function is not a JSON value')
    case 'symbol':
      throw new NotJSONError(path, 'a symbol is not a JSON value')
  }
  if (v === null) return 'null'
  if (v instanceof RawJSON) return compact(v.text)
  const obj = v as Record<string, unknown>
  if (stack.includes(obj)) throw new NotJSONError(path, 'a cycle: the value contains itself')
  if (typeof obj['toJSON'] === 'function') {
    return write((obj['toJSON'] as () => unknown).call(obj), path, stack)
  }
  if (v instanceof Map || v instanceof Set || v instanceof WeakMap || v instanceof WeakSet) {
    throw new NotJSONError(path, `a ${v.constructor.name} is not a JSON value (use a plain object or a list)`)
  }
  if (v instanceof Promise) throw new NotJSONError(path, 'a Promise is not a JSON value (await it)')
  stack.push(obj)
  try {
    if (Array.isArray(v)) {
      const parts = v.map((e, i) => write(e, `${path}[${i}]`, stack))
      return '[' + parts.join(',') + ']'
    }
    if (ArrayBuffer.isView(v)) {
      throw new NotJSONError(path, 'binary data is not a JSON value (encode it, e.g. as base64)')
    }
    const keys = Object.keys(obj).filter((k) => obj[k] !== undefined)
    keys.sort(compareUTF8)
    const parts = keys.map((k) => quote(k) + ':' + write(obj[k], pathKey(path, k), stack))
    return '{' + parts.join(',') + '}'
  } finally {
    stack.pop()
  }
}

// A parsed JSON value that keeps what Go's decoder with UseNumber keeps:
// numbers as their text, and objects' members in order (duplicates too).
export type JValue =
  | { kind: 'null' }
  | { kind: 'bool'; value: boolean }
  | { kind: 'number'; text: string }
  | { kind: 'string'; value: string }
  | { kind: 'array'; items: JValue[] }
  | { kind: 'object'; members: [string, JValue][] }

/** JSONSyntaxError is invalid JSON text, with the offset where it is wrong. */
export class JSONSyntaxError extends Error {
  override name = 'JSONSyntaxError'
  constructor(
    message: string,
    readonly offset: number,
  ) {
    super(message)
  }
}

/**
 * parse reads JSON text strictly (as Go does), keeping number lexemes.
 * spans, if given, receives each member of a top-level object: its key and
 * where its value's text starts and ends (what Go's json.RawMessage of the
 * member holds).
 */
export function parse(text: string, spans?: [string, number, number][]): JValue {
  let i = 0
  const ws = () => {
    while (i < text.length) {
      const c = text.charCodeAt(i)
      if (c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d) i++
      else break
    }
  }
  const fail = (what: string): never => {
    // As Go's SyntaxError: the offset is just after the byte that is wrong.
    if (i >= text.length) throw new JSONSyntaxError('unexpected end of JSON input', text.length)
    const c = text[i] as string
    throw new JSONSyntaxError(`invalid character ${c === "'" ? "'\\''" : `'${c}'`} ${what}`, i + 1)
  }
  const value = (depth: number): JValue => {
    if (depth > 10000) fail('exceeded max depth')
    ws()
    const c = text[i]
    switch (c) {
      case '{': {
        i++
        const members: [string, JValue][] = []
        ws()
        if (text[i] === '}') {
          i++
          return { kind: 'object', members }
        }
        for (;;) {
          ws()
          if (text[i] !== '"') fail('looking for beginning of object key string')
          const k = str()
          ws()
          if (text[i] !== ':') fail('after object key')
          i++
          ws()
          const from = i
          members.push([k, value(depth + 1)])
          if (depth === 0) spans?.push([k, from, i])
          ws()
          if (text[i] === ',') {
            i++
            continue
          }
          if (text[i] === '}') {
            i++
            return { kind: 'object', members }
          }
          fail('after object key:value pair')
        }
      }
      case '[': {
        i++
        const items: JValue[] = []
        ws()
        if (text[i] === ']') {
          i++
          return { kind: 'array', items }
        }
        for (;;) {
          items.push(value(depth + 1))
          ws()
          if (text[i] === ',') {
            i++
            continue
          }
          if (text[i] === ']') {
            i++
            return { kind: 'array', items }
          }
          fail('after array element')
        }
      }
      case '"':
        return { kind: 'string', value: str() }
      case 't':
        return lit('true', { kind: 'bool', value: true })
      case 'f':
        return lit('false', { kind: 'bool', value: false })
      case 'n':
        return lit('null', { kind: 'null' })
      default: {
        const m = /^-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?/.exec(text.slice(i, i + 1100))
        if (m === null || m[0] === '' || m[0] === '-') return fail('looking for beginning of value')
        i += m[0].length
        return { kind: 'number', text: m[0] }
      }
    }
  }
  const lit = (word: string, v: JValue): JValue => {
    if (text.startsWith(word, i)) {
      i += word.length
      return v
    }
    return fail(`in literal ${word}`)
  }
  const str = (): string => {
    i++ // the opening quote
    let out = ''
    let start = i
    for (;;) {
      if (i >= text.length) fail('in string literal')
      const c = text.charCodeAt(i)
      if (c === 0x22) {
        out += text.slice(start, i)
        i++
        return out
      }
      if (c < 0x20) fail('in string literal')
      if (c === 0x5c) {
        out += text.slice(start, i)
        const e = text[i + 1]
        switch (e) {
          case '"':
          case '\\':
          case '/':
            out += e
            i += 2
            break
          case 'b':
            out += '\b'
            i += 2
            break
          case 'f':
            out += '\f'
            i += 2
            break
          case 'n':
            out += '\n'
            i += 2
            break
          case 'r':
            out += '\r'
            i += 2
            break
          case 't':
            out += '\t'
            i += 2
            break
          case 'u': {
            const h = text.slice(i + 2, i + 6)
            if (!/^[0-9a-fA-F]{4}$/.test(h)) {
              i += 2
              fail('in \\u hexadecimal character escape')
            }
            out += String.fromCharCode(parseInt(h, 16))
            i += 6
            break
          }
          default:
            i++
            fail('in string escape code')
        }
        start = i
        continue
      }
      i++
    }
  }
  const v = value(0)
  ws()
  if (i < text.length) fail('after top-level value')
  return v
}

/** render writes a parsed value back: compact, members in order, Go's escaping. */
export function render(v: JValue): string {
  switch (v.kind) {
    case 'null':
      return 'null'
    case 'bool':
      return v.value ? 'true' : 'false'
    case 'number':
      return v.text
    case 'string':
      return quote(v.value)
    case 'array':
      return '[' + v.items.map(render).join(',') + ']'
    case 'object':
      return '{' + v.members.map(([k, e]) => quote(k) + ':' + render(e)).join(',') + '}'
  }
}

/** compact is Go's compaction of a json.RawMessage in an encoded value. */
export function compact(text: string): string {
  return render(parse(text))
}
