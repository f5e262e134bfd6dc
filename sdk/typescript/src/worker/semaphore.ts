/** Semaphore bounds how many of something run at once. */
export class Semaphore {
  private waiters: (() => void)[] = []
  private used = 0
  constructor(readonly size: number) {}

  /** acquire takes a slot, waiting for one; false when the signal aborted first. */
  acquire(signal?: AbortSignal): Promise<boolean> {
    if (signal?.aborted) return Promise.resolve(false)
    if (this.used < this.size) {
      this.used++
      return Promise.resolve(true)
    }
    return new Promise((resolve) => {
      const onAbort = () => {
        const i = this.waiters.indexOf(grant)
        if (i >= 0) this.waiters.splice(i, 1)
        resolve(false)
      }
      const grant = () => {
        signal?.removeEventListener('abort', onAbort)
        this.used++
        resolve(true)
      }
      this.waiters.push(grant)
      signal?.addEventListener('abort', onAbort, { once: true })
    })
  }

  /** tryAcquire takes a slot if one is free. */
  tryAcquire(): boolean {
    if (this.used >= this.size) return false
    this.used++
    return true
  }

  release(): void {
    this.used--
    const next = this.waiters.shift()
    if (next !== undefined) next()
  }
}
