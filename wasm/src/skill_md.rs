//! `parseSkillMd`: the `toolnexus-wasm/skills` entry (feature `skill-md`).
//!
//! The YAML parser lives in this entry's own `.wasm`, so the full and client
//! entries, which take skills as data, do not carry it.

use crate::convert::{misuse, ser_to_js};
use wasm_bindgen::prelude::*;

/// `parseSkillMd(text)`: a SKILL.md text (YAML frontmatter with `name` and
/// an optional `description`, then the Markdown body) as the skill object
/// `{name, description, content}` that `createA2AHandler` and
/// `createToolkit` take. A malformed text throws an `Error` of kind
/// `"misuse"` whose message says why (`missing \`name\` in frontmatter`, …).
#[wasm_bindgen(js_name = parseSkillMd)]
pub fn parse_skill_md(text: &str) -> Result<JsValue, JsValue> {
    match toolnexus_core::skills::parse_skill_md(text) {
        Ok(skill) => Ok(ser_to_js(&skill)),
        Err(reason) => Err(misuse(format!("not a SKILL.md: {reason}"))),
    }
}
