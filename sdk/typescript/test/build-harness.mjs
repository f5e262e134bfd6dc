// Builds internal/sdkharness (the Go side of the tests) into .cache/sdkharness.
import { execFileSync } from 'node:child_process'
import { bin, root } from './harness.mjs'

execFileSync('go', ['build', '-o', bin, './internal/sdkharness'], { cwd: root, stdio: 'inherit' })
