/**
 * The model's text rendered as markdown in the terminal: `marked` lexes it, these components draw
 * headings, emphasis, inline code, code blocks, lists, quotes and rules. The text is sanitized
 * before (screen.ts), so no token can carry an escape sequence. A partial text (still streaming)
 * renders as far as it goes.
 */
import { Box, Text } from "ink"
import { lexer, type Token, type Tokens } from "marked"
import type React from "react"
import { useTheme } from "./theme.js"

const inline = (tokens: ReadonlyArray<Token> | undefined, key = "i"): React.ReactNode =>
  (tokens ?? []).map((token, i) => <Inline key={`${key}${i}`} token={token} />)

const Inline = ({ token }: { readonly token: Token }): React.ReactNode => {
  const theme = useTheme()
  switch (token.type) {
    case "strong":
      return <Text bold>{inline((token as Tokens.Strong).tokens)}</Text>
    case "em":
      return <Text italic>{inline((token as Tokens.Em).tokens)}</Text>
    case "del":
      return <Text strikethrough>{inline((token as Tokens.Del).tokens)}</Text>
    case "codespan":
      return <Text {...theme.fg("cyan")}>{decode((token as Tokens.Codespan).text)}</Text>
    case "link": {
      const link = token as Tokens.Link
      const label = link.tokens === undefined || link.tokens.length === 0 ? link.href : inline(link.tokens)
      return (
        <Text>
          <Text underline>{label}</Text>
          {link.text !== link.href ? <Text dimColor> ({link.href})</Text> : null}
        </Text>
      )
    }
    case "br":
      return <Text>{"\n"}</Text>
    case "text": {
      const text = token as Tokens.Text
      return text.tokens !== undefined && text.tokens.length > 0 ? (
        <Text>{inline(text.tokens)}</Text>
      ) : (
        <Text>{decode(text.text)}</Text>
      )
    }
    case "escape":
      return <Text>{decode((token as Tokens.Escape).text)}</Text>
    default:
      return <Text>{"raw" in token ? decode(String(token.raw)) : ""}</Text>
  }
}

const entities: Record<string, string> = { "&amp;": "&", "&lt;": "<", "&gt;": ">", "&quot;": '"', "&#39;": "'" }
const decode = (text: string): string => text.replace(/&(?:amp|lt|gt|quot|#39);/g, (m) => entities[m] ?? m)

const Block = ({ token }: { readonly token: Token }): React.ReactNode => {
  const theme = useTheme()
  switch (token.type) {
    case "space":
      return null
    case "heading": {
      const heading = token as Tokens.Heading
      return (
        <Text bold {...theme.fg("magenta")}>
          {heading.depth <= 2 ? "" : `${"#".repeat(heading.depth)} `}
          {inline(heading.tokens)}
        </Text>
      )
    }
    case "paragraph":
      return <Text>{inline((token as Tokens.Paragraph).tokens)}</Text>
    case "code": {
      const code = token as Tokens.Code
      return (
        <Box flexDirection="column" paddingLeft={2}>
          {code.lang ? <Text dimColor>{code.lang}</Text> : null}
          <Text {...theme.fg("green")}>{code.text}</Text>
        </Box>
      )
    }
    case "blockquote":
      return (
        <Box paddingLeft={1} borderStyle="single" borderLeft borderTop={false} borderRight={false} borderBottom={false}>
          <Box flexDirection="column">
            {(token as Tokens.Blockquote).tokens.map((t, i) => (
              <Block key={i} token={t} />
            ))}
          </Box>
        </Box>
      )
    case "list": {
      const list = token as Tokens.List
      const start = typeof list.start === "number" ? list.start : 1
      return (
        <Box flexDirection="column">
          {list.items.map((item, i) => (
            <Box key={i}>
              {/* the marker keeps its width: a Text shrinks, and the item's lines then overflow the terminal */}
              <Box flexShrink={0}>
                <Text>{list.ordered ? `${start + i}. ` : item.task ? (item.checked ? "[x] " : "[ ] ") : "• "}</Text>
              </Box>
              <Box flexDirection="column" flexShrink={1}>
                {item.tokens.map((t, j) => (
                  <Block key={j} token={t} />
                ))}
              </Box>
            </Box>
          ))}
        </Box>
      )
    }
    case "hr":
      return <Text dimColor>{"─".repeat(20)}</Text>
    case "text": {
      const text = token as Tokens.Text
      return text.tokens !== undefined ? <Text>{inline(text.tokens)}</Text> : <Text>{decode(text.text)}</Text>
    }
    default:
      return <Text>{"raw" in token ? String(token.raw).replace(/\n+$/, "") : ""}</Text>
  }
}

/** `text` as markdown; a text marked cannot lex is shown as it is. */
export const Markdown = ({ text }: { readonly text: string }): React.ReactNode => {
  let tokens: ReadonlyArray<Token>
  try {
    tokens = lexer(text, { gfm: true })
  } catch {
    return <Text>{text}</Text>
  }
  return (
    <Box flexDirection="column">
      {tokens.map((token, i) => (
        <Block key={i} token={token} />
      ))}
    </Box>
  )
}
