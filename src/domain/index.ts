export * as Events from "./Events.js"
export * from "./Ids.js"
export * from "./Message.js"
