/**
 * A `Stream` built from a scoped pull that keeps its pull, so that the kernel can read it without
 * the Stream's channel machinery (docs/architecture.md, "The Processor's pipeline"). `openPull`
 * gives back the pull of a stream made by `fromPull` (the same object, not a stream derived from
 * it) and `Stream.toPull` of any other, so a layer that builds its stream some other way works
 * unchanged. The model layers' streams and the log's `follow` are made this way.
 * test/stream/pull.test.ts holds the side channel to `Stream.toPull` and `mapPullEither` to
 * `Stream.mapEffect`.
 */
import { Chunk, Effect, Either, Option, type Scope, Stream } from "effect"

/** One read of a stream: the next non-empty chunk, or `None` at its end. */
export type Pull<A, E> = Effect.Effect<Chunk.Chunk<A>, Option.Option<E>>

/** Opens a stream in the caller's scope (the request is sent, its resources are the scope's) and gives its pull. */
export type OpenPull<A, E> = Effect.Effect<Pull<A, E>, E, Scope.Scope>

const kept = new WeakMap<Stream.Stream<unknown, unknown>, OpenPull<unknown, unknown>>()

/** The stream of `open`'s pull (`Stream.unwrapScoped` of `Stream.repeatEffectChunkOption`), which keeps `open`. */
export const fromPull = <A, E>(open: OpenPull<A, E>): Stream.Stream<A, E> => {
  const stream = Stream.unwrapScoped(Effect.map(open, Stream.repeatEffectChunkOption))
  kept.set(stream, open)
  return stream
}

/** Whether `stream` was made by `fromPull` (and `openPull` reads it without a channel). */
export const keepsPull = (stream: Stream.Stream<unknown, unknown>): boolean => kept.has(stream)

/** Opens `stream` in the caller's scope: the pull it was made from, or `Stream.toPull`. */
export const openPull = <A, E>(stream: Stream.Stream<A, E>): OpenPull<A, E> =>
  (kept.get(stream) as OpenPull<A, E> | undefined) ?? Stream.toPull(stream)

/** `f` over `chunk` up to the first element it refuses: the values before it, and the refusal. */
export const mapUntilLeft = <A, B, E>(
  chunk: Iterable<A>,
  f: (a: A) => Either.Either<B, E>
): { readonly values: Chunk.Chunk<B>; readonly refused: Option.Option<E> } => {
  const values: Array<B> = []
  for (const a of chunk) {
    const mapped = f(a)
    if (Either.isLeft(mapped)) return { values: Chunk.unsafeFromArray(values), refused: Option.some(mapped.left) }
    values.push(mapped.right)
  }
  return { values: Chunk.unsafeFromArray(values), refused: Option.none() }
}

/**
 * The pull of `f` over each element of `pull`'s chunks. An element `f` refuses fails the pull with
 * that error, after the elements before it in its chunk: the call that read it gives those, the
 * next one fails (as `Stream.mapEffect` of the same `f` would emit them, then fail).
 */
export const mapPullEither = <A, B, E, E2>(pull: Pull<A, E>, f: (a: A) => Either.Either<B, E2>): Pull<B, E | E2> => {
  let refused: Option.Option<E2> = Option.none()
  const mapChunk = (chunk: Chunk.Chunk<A>): Pull<B, E | E2> => {
    const mapped = mapUntilLeft(chunk, f)
    // once refused, every later call fails with it (nothing past the refused element is read)
    refused = mapped.refused
    return Option.isSome(mapped.refused) && Chunk.isEmpty(mapped.values)
      ? Effect.fail(mapped.refused)
      : Effect.succeed(mapped.values)
  }
  return Effect.suspend(() => (Option.isSome(refused) ? Effect.fail(refused) : Effect.flatMap(pull, mapChunk)))
}
