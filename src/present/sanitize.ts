/**
 * Text from the model, from commands and from files, made safe to put on the screen: nothing in it
 * can move the cursor, clear the screen, change the title or switch character sets. Escape
 * sequences (CSI, OSC, DCS and the rest) and control characters are removed; a carriage return
 * keeps what a terminal would show of the line (the text after the last `\r`: a progress bar's
 * latest state); tabs become spaces. Newlines stay.
 */

const ESC = "\u001b"
const BEL = "\u0007"

// CSI: ESC [ params intermediates final; OSC / DCS / SOS / PM / APC: ESC ] … (BEL | ESC \);
// any other ESC + one character; the 8-bit C1 forms of the same (0x9b CSI, 0x9d OSC …)
const sequences = new RegExp(
  [
    `${ESC}\\[[0-?]*[ -/]*[@-~]`,
    `${ESC}[\\]PX^_][^${BEL}${ESC}]*(?:${BEL}|${ESC}\\\\)?`,
    `${ESC}[ -/]*[0-~]?`,
    "\u009b[0-?]*[ -/]*[@-~]",
    `[\u009d\u0090\u0098\u009e\u009f][^${BEL}${ESC}\u009c]*(?:${BEL}|\u009c|${ESC}\\\\)?`
  ].join("|"),
  "g"
)

// every C0 control but \t and \n (\r is handled per line), DEL and C1
// biome-ignore lint/suspicious/noControlCharactersInRegex: removing them is the point
const controls = /[\u0000-\u0008\u000b-\u000c\u000e-\u001f\u007f-\u009f]/g

/** The text with every escape sequence and control character removed (see the module doc). */
export const sanitize = (text: string): string => {
  const plain = text.replace(sequences, "").replace(/\r\n/g, "\n")
  const lines = plain.split("\n").map((line) => {
    const cr = line.lastIndexOf("\r")
    const shown = cr < 0 ? line : cr === line.length - 1 ? line.slice(0, cr).split("\r").at(-1)! : line.slice(cr + 1)
    return shown.replace(/\t/g, "    ").replace(controls, "")
  })
  return lines.join("\n")
}
