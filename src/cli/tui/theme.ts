/**
 * Colours of the interactive screen, or none: with `NO_COLOR` (or a terminal without colours) every
 * `color` prop is left out, and what a colour meant is also said by a symbol or a word.
 */
import { createContext, useContext } from "react"

export type ColorName = "red" | "green" | "yellow" | "blue" | "magenta" | "cyan" | "gray"

export interface Theme {
  readonly colors: boolean
  /** `{color}` for a Text, or nothing when colours are off */
  readonly fg: (name: ColorName) => { readonly color?: ColorName }
  /** `{borderColor}` for a Box, or nothing when colours are off */
  readonly border: (name: ColorName) => { readonly borderColor?: ColorName }
}

export const makeTheme = (colors: boolean): Theme => ({
  colors,
  fg: (name) => (colors ? { color: name } : {}),
  border: (name) => (colors ? { borderColor: name } : {})
})

export const ThemeContext = createContext<Theme>(makeTheme(false))

export const useTheme = (): Theme => useContext(ThemeContext)
