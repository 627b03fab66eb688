/**
 * The release version, injected by scripts/build.mjs from package.json (esbuild `define`).
 */
declare const __LOGBOOK_VERSION__: string | undefined

export const version: string = typeof __LOGBOOK_VERSION__ === "string" ? __LOGBOOK_VERSION__ : "0.0.0-dev"
