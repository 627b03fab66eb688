/**
 * A `fetch` whose response bodies stop at a size: past `maxBytes` the body errors, so a Streamable
 * HTTP server cannot make logbook hold more than that of one response.
 */

export type FetchLike = (url: string | URL, init?: RequestInit) => Promise<Response>

export const cappedFetch =
  (maxBytes: number, onTooLarge: () => void, base: FetchLike = fetch): FetchLike =>
  async (url, init) => {
    const response = await base(url, init)
    if (response.body === null) return response
    let seen = 0
    const counter = new TransformStream<Uint8Array, Uint8Array>({
      transform(chunk, controller) {
        seen += chunk.byteLength
        if (seen > maxBytes) {
          onTooLarge()
          controller.error(new Error(`the server sent more than ${maxBytes} bytes in one response`))
          return
        }
        controller.enqueue(chunk)
      }
    })
    return new Response(response.body.pipeThrough(counter), {
      status: response.status,
      statusText: response.statusText,
      headers: response.headers
    })
  }
