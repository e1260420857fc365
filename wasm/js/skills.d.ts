// toolnexus-wasm/skills: SKILL.md texts to skills, with a real YAML parser.
// Its own .wasm, so the other entries (which take skills as data) don't carry
// the parser.

/** A skill as data, as `createA2AHandler` and `createToolkit` take it. */
export interface Skill {
  name: string;
  description: string;
  /** The Markdown body: the instructions the model loads with the `skill` tool. */
  content: string;
}

/**
 * Parses a SKILL.md text: YAML frontmatter between a first `---` line and the
 * next `---` line (`name` required, `description` optional; both trimmed),
 * then the Markdown body (leading blank lines and trailing whitespace
 * removed). CRLF line endings and a BOM are accepted. Throws an Error of kind
 * "misuse" whose message says why a text is not a SKILL.md (no frontmatter,
 * a YAML error, a missing or non-string `name`, ...).
 */
export function parseSkillMd(text: string): Skill;
