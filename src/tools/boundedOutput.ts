/**
 * Output bounded for the model: a command's output kept as its head and tail in bounded memory, a
 * tool error cut the same way, sizes in words.
 */
/** `1234` -> `"1.2 KB"`, for notes to the model. */
export const formatBytes = (bytes: number): string => {
  if (bytes < 1024) return `${bytes} bytes`
  const round = (n: number) => n.toFixed(1).replace(/\.0$/, "")
  if (bytes < 1024 * 1024) return `${round(bytes / 1024)} KB`
  return `${round(bytes / (1024 * 1024))} MB`
}

/** Drops the bytes of a UTF-8 character cut at the end of `bytes`. */
const trimIncompleteEnd = (bytes: Buffer): Buffer => {
  let end = bytes.length
  // step back over continuation bytes to the lead byte of the last character
  let i = end - 1
  while (i >= 0 && i >= end - 4 && (bytes[i]! & 0xc0) === 0x80) i--
  if (i < 0) return bytes
  const lead = bytes[i]!
  const width = lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : lead >= 0xc0 ? 2 : 1
  if (i + width > end) end = i
  return bytes.subarray(0, end)
}

/** Drops the continuation bytes of a UTF-8 character cut at the start of `bytes`. */
const trimIncompleteStart = (bytes: Buffer): Buffer => {
  let start = 0
  while (start < bytes.length && start < 4 && (bytes[start]! & 0xc0) === 0x80) start++
  return bytes.subarray(start)
}

/**
 * Collects a stream of output bytes in bounded memory: the first `headBytes` and the last
 * `tailBytes`, and the total count. `text()` joins them with a marker saying how much was left out.
 */
export class HeadTailBuffer {
  private readonly head: Array<Buffer> = []
  private headLength = 0
  private tail: Array<Buffer> = []
  private tailLength = 0
  /** all bytes seen so far */
  bytes = 0

  constructor(
    readonly headBytes: number,
    readonly tailBytes: number
  ) {}

  /** every chunk, while the whole output is within `keepAll`'s limit */
  private all: Array<Buffer> | undefined
  private allLimit = 0

  /** Also keeps the whole output, up to `maxBytes` (beyond that only head and tail are kept). */
  keepAll(maxBytes: number): this {
    this.all = []
    this.allLimit = maxBytes
    return this
  }

  /** The whole output when `keepAll` was asked for and it stayed within the limit. */
  whole(): Buffer | undefined {
    return this.all === undefined ? undefined : Buffer.concat(this.all)
  }

  append(chunk: Buffer): void {
    this.bytes += chunk.length
    if (this.all !== undefined) {
      if (this.bytes <= this.allLimit) this.all.push(chunk)
      else this.all = undefined
    }
    let rest = chunk
    if (this.headLength < this.headBytes) {
      const take = Math.min(this.headBytes - this.headLength, rest.length)
      this.head.push(rest.subarray(0, take))
      this.headLength += take
      rest = rest.subarray(take)
    }
    if (rest.length === 0) return
    this.tail.push(rest)
    this.tailLength += rest.length
    // drop whole chunks from the front while the rest still covers the tail
    while (this.tail.length > 1 && this.tailLength - this.tail[0]!.length >= this.tailBytes) {
      this.tailLength -= this.tail.shift()!.length
    }
  }

  /** true when some bytes were left out */
  get truncated(): boolean {
    return this.bytes > this.headBytes + this.tailBytes
  }

  /** the last `n` bytes seen, as text (for progress reports) */
  last(n: number): string {
    const all = Buffer.concat([...(this.tailLength >= n ? [] : this.head), ...this.tail])
    const slice = all.length > n ? trimIncompleteStart(all.subarray(all.length - n)) : all
    return slice.toString("utf8")
  }

  /** everything, or the head and the tail around a marker saying how many bytes were left out */
  text(): string {
    const head = Buffer.concat(this.head)
    const tailAll = Buffer.concat(this.tail)
    if (!this.truncated) return Buffer.concat([head, tailAll]).toString("utf8")
    const tail = tailAll.subarray(tailAll.length - this.tailBytes)
    const omitted = this.bytes - head.length - tail.length
    const headText = trimIncompleteEnd(head).toString("utf8")
    const tailText = trimIncompleteStart(tail).toString("utf8")
    return `${headText}\n\n… [${omitted} bytes (${formatBytes(omitted)}) of output left out; showing the first ${formatBytes(head.length)} and the last ${formatBytes(tail.length)}] …\n\n${tailText}`
  }
}

/** A tool call's error is cut to its first and last bytes beyond this size. */
export const MAX_ERROR_BYTES = 16 * 1024

/**
 * A text bounded like a command's output: beyond `headBytes + tailBytes` bytes, its head and its
 * tail around a marker saying how much was left out (a tool error naming a 1 MB path is not 3 MB).
 */
export const capText = (text: string, headBytes = MAX_ERROR_BYTES / 2, tailBytes = MAX_ERROR_BYTES / 4): string => {
  if (text.length <= headBytes + tailBytes && Buffer.byteLength(text) <= headBytes + tailBytes) return text
  const buffer = new HeadTailBuffer(headBytes, tailBytes)
  buffer.append(Buffer.from(text))
  return buffer.text()
}
