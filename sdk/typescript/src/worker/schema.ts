// Node input and output schemas (Go: pkg/worker schema.go): JSON Schemas,
// draft 2020-12, written in the graph. The input state is checked before
// the node runs and the output after; a value that does not match fails the
// attempt with a non-retryable "ValidationError" naming each failing field
// as a JSON pointer, its details listing them. Schemas load nothing: a
// $ref to another document fails the node.

import { createHash } from 'node:crypto'
import { createRequire } from 'node:module'
import type { ErrorObject, ValidateFunction } from 'ajv/dist/2020.js'
import { FailureType } from '../events/payloads.js'
import { marshal } from '../internal/gojson.js'
import { errorMessage } from '../internal/util.js'
import { NodeError, nonRetryable } from './errors.js'

type AjvLike = { compile(schema: unknown): ValidateFunction }
const require = createRequire(import.meta.url)
const Ajv2020 = (require('ajv/dist/2020.js') as { default: new (o: object) => AjvLike }).default

let ajv: AjvLike | undefined
const compiled = new Map<string, ValidateFunction | Error>()

function compile(schema: unknown): ValidateFunction {
  const text = marshal(schema)
  const key = createHash('sha256').update(text).digest('hex')
  let v = compiled.get(key)
  if (v === undefined) {
    ajv ??= new Ajv2020({ allErrors: true, strict: false, validateFormats: false })
    try {
      v = ajv.compile(typeof schema === 'boolean' ? schema : JSON.parse(text))
    } catch (err) {
      v = err instanceof Error ? err : new Error(String(err))
    }
    if (compiled.size > 1024) compiled.clear()
    compiled.set(key, v)
  }
  if (v instanceof Error) throw v
  return v
}

/** FieldError is one field of a value that does not match its schema. */
export interface FieldError {
  field: string
  message: string
}

/** checkSchema validates v against schema (none: nothing to check); what names the value ("input", "output"). */
export function checkSchema(what: string, schema: unknown, v: unknown): void {
  if (schema === undefined || schema === null) return
  let validate: ValidateFunction
  try {
    validate = compile(schema)
  } catch (err) {
    throw nonRetryable(FailureType.Validation, `the node's ${what} schema does not compile: ${errorMessage(err)}`)
  }
  let inst: unknown
  try {
    inst = JSON.parse(marshal(v ?? null))
  } catch (err) {
    throw nonRetryable(FailureType.Validation, `the node's ${what} does not encode as JSON: ${errorMessage(err)}`)
  }
  if (validate(inst)) return
  const fields: FieldError[] = (validate.errors ?? []).map((e: ErrorObject) => ({ field: e.instancePath, message: message(e) }))
  const parts = fields.map((f) => `${f.field === '' ? '/' : f.field}: ${f.message}`)
  throw new NodeError(FailureType.Validation, `${what} does not match its schema: ${parts.join('; ')}`, { details: { schema: what, fields } })
}

function message(e: ErrorObject): string {
  if (e.keyword === 'required') return `missing property '${(e.params as { missingProperty?: string }).missingProperty ?? ''}'`
  if (e.keyword === 'additionalProperties') return `additional property '${(e.params as { additionalProperty?: string }).additionalProperty ?? ''}' not allowed`
  return e.message ?? e.keyword
}
