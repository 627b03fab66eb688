/** A stand-in for stdout or stderr that collects what is written to it (`OutputStream` of runWriter.ts). */
export const fakeStream = (isTTY: boolean, columns = 80, rows = 24) => {
  const chunks: Array<string> = []
  return {
    isTTY,
    columns,
    rows,
    write: (text: string) => void chunks.push(text),
    /** everything written so far */
    text: () => chunks.join(""),
    /** forgets what was written so far */
    clear: () => void chunks.splice(0)
  }
}
