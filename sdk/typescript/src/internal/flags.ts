// Command-line flags in the Go flag package's form (-name value,
// -name=value, --name value), for the repository's small programs that Go
// tests and tools start beside Go daemons with the same arguments.

import { parseDuration } from './duration.js'

/** Flags holds parsed flags by name. */
export class Flags {
  private constructor(private readonly values: Map<string, string>) {}

  /** parse reads args; every flag takes a value, and only the names in known are accepted. */
  static parse(args: string[], known: string[]): Flags {
    const values = new Map<string, string>()
    for (let i = 0; i < args.length; i++) {
      const a = args[i] as string
      const m = /^--?([a-z][a-z0-9-]*)(?:=(.*))?$/.exec(a)
      if (m === null) throw new Error(`unexpected argument ${JSON.stringify(a)}`)
      const name = m[1] as string
      if (!known.includes(name)) throw new Error(`unknown flag -${name} (known: ${known.map((k) => '-' + k).join(', ')})`)
      let v = m[2]
      if (v === undefined) {
        if (i + 1 >= args.length) throw new Error(`flag -${name} needs a value`)
        v = args[++i] as string
      }
      values.set(name, v)
    }
    return new Flags(values)
  }

  string(name: string, def = ''): string {
    return this.values.get(name) ?? def
  }

  int(name: string, def: number): number {
    const v = this.values.get(name)
    if (v === undefined) return def
    const n = Number(v)
    if (!Number.isInteger(n)) throw new Error(`-${name} ${JSON.stringify(v)}: want an integer`)
    return n
  }

  /** ms reads a Go duration ("3s", "250ms") as milliseconds. */
  ms(name: string, def: number): number {
    const v = this.values.get(name)
    if (v === undefined) return def
    return Number(parseDuration(v) / 1_000_000n)
  }
}
