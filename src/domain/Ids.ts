/**
 * Branded identifiers and their generators.
 *
 * Event ids are UUIDv7: 48 bits of UTC milliseconds, then random bits, so ids sort by creation
 * time. They are generated from the `Clock` and `Random` services, never from `Date.now()` or
 * `Math.random()`, so tests under `TestClock` produce stable, ordered ids.
 */
import { Clock, Effect, Random, Schema } from "effect"

/** A non-empty string branded as one kind of id. */
const brandedId = <B extends string>(brand: B) => Schema.String.pipe(Schema.minLength(1), Schema.brand(brand))

export const SessionId = brandedId("SessionId")
export type SessionId = typeof SessionId.Type
export const EventId = brandedId("EventId")
export type EventId = typeof EventId.Type
export const MessageId = brandedId("MessageId")
export type MessageId = typeof MessageId.Type
export const PartId = brandedId("PartId")
export type PartId = typeof PartId.Type
export const CallId = brandedId("CallId")
export type CallId = typeof CallId.Type
export const ActionId = brandedId("ActionId")
export type ActionId = typeof ActionId.Type
export const TurnId = brandedId("TurnId")
export type TurnId = typeof TurnId.Type

const HEX = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, "0"))

/** Formats a UUIDv7 from a millisecond timestamp and 10 random bytes. */
export const formatUuidV7 = (millis: number, random: ArrayLike<number>): string => {
  const ms = Math.max(0, Math.floor(millis))
  const high = Math.floor(ms / 0x10000) // top 32 bits of the 48-bit timestamp
  const low = ms % 0x10000
  const b = random
  return (
    HEX[(high >>> 24) & 0xff]! +
    HEX[(high >>> 16) & 0xff]! +
    HEX[(high >>> 8) & 0xff]! +
    HEX[high & 0xff]! +
    "-" +
    HEX[low >>> 8]! +
    HEX[low & 0xff]! +
    "-" +
    HEX[0x70 | (b[0]! & 0x0f)]! +
    HEX[b[1]! & 0xff]! +
    "-" +
    HEX[0x80 | (b[2]! & 0x3f)]! +
    HEX[b[3]! & 0xff]! +
    "-" +
    HEX[b[4]! & 0xff]! +
    HEX[b[5]! & 0xff]! +
    HEX[b[6]! & 0xff]! +
    HEX[b[7]! & 0xff]! +
    HEX[b[8]! & 0xff]! +
    HEX[b[9]! & 0xff]!
  )
}

const randomPool = new Uint8Array(10 * 256)
let randomOffset = randomPool.length

/**
 * A UUIDv7 for a given time with random bits from the platform's CSPRNG, without an effect per id:
 * for hot paths (the store stamps every event) where ids need to be unique and time-ordered but
 * not reproducible. Kernel code uses `uuidV7`, which draws from the `Random` service.
 */
export const uuidV7At = (millis: number): string => {
  if (randomOffset + 10 > randomPool.length) {
    globalThis.crypto.getRandomValues(randomPool)
    randomOffset = 0
  }
  const bytes = randomPool.subarray(randomOffset, randomOffset + 10)
  randomOffset += 10
  return formatUuidV7(millis, bytes)
}

/** A new UUIDv7 string, using `Clock` and `Random`. */
export const uuidV7: Effect.Effect<string> = Effect.gen(function* () {
  const millis = yield* Clock.currentTimeMillis
  const bytes: Array<number> = []
  // four 24-bit draws give the 80 random bits the format needs
  for (let i = 0; i < 4; i++) {
    const n = yield* Random.nextIntBetween(0, 0x1000000)
    bytes.push(n >> 16, (n >> 8) & 0xff, n & 0xff)
  }
  return formatUuidV7(millis, bytes)
})

/** A new time-ordered id of the given kind. */
const makeId = <A>(schema: { readonly make: (s: string) => A }): Effect.Effect<A> =>
  Effect.map(uuidV7, (s) => schema.make(s))

export const makeSessionId: Effect.Effect<SessionId> = makeId(SessionId)
export const makeEventId: Effect.Effect<EventId> = makeId(EventId)
export const makeMessageId: Effect.Effect<MessageId> = makeId(MessageId)
export const makePartId: Effect.Effect<PartId> = makeId(PartId)
export const makeCallId: Effect.Effect<CallId> = makeId(CallId)
export const makeActionId: Effect.Effect<ActionId> = makeId(ActionId)
export const makeTurnId: Effect.Effect<TurnId> = makeId(TurnId)
