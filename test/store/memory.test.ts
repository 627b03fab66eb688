import { EventStore } from "../../src/store/EventStore.js"
import { conformance } from "./conformance.js"

conformance("memory", () => EventStore.layerMemory)
