import { EventStore } from "../../src/store/EventStore.js"
import { tempDb } from "../support/tmp.js"
import { conformance } from "./conformance.js"

conformance("sqlite", () => EventStore.layerSqlite({ filename: tempDb() }))
