//! Skills from JS: `{name, description?, content?}` objects.

use crate::convert::{console_warn, is_absent, misuse, to_json};
use js_sys::Array;
use toolnexus_core::skills::{Skill, SkillSet};
use wasm_bindgen::JsValue;

/// Reads `skills`: an array of skill objects (a missing or empty `name` is
/// an error). A SKILL.md text is an error that names `parseSkillMd`: the
/// YAML parser is in its own entry (`toolnexus-wasm/skills`). Later
/// duplicates of a name are logged and skipped: the first wins.
pub fn skill_set(v: &JsValue, what: &str) -> Result<SkillSet, JsValue> {
    let mut set = SkillSet::new();
    if is_absent(v) {
        return Ok(set);
    }
    if !Array::is_array(v) {
        return Err(misuse(format!(
            "{what} must be an array of {{name, description, content}} objects"
        )));
    }
    for (i, item) in Array::from(v).iter().enumerate() {
        if item.is_string() {
            return Err(misuse(format!(
                "{what}[{i}] is a SKILL.md text: turn it into a skill with parseSkillMd from \"toolnexus-wasm/skills\" (the YAML parser is in that entry's own .wasm)"
            )));
        }
        let value = to_json(&item, &format!("{what}[{i}]"))?;
        let skill = Skill::from_value(&value).map_err(|e| {
            misuse(format!(
                "{what}[{i}] must be {{name, description?, content?}}: {e}"
            ))
        })?;
        if skill.name.trim().is_empty() {
            return Err(misuse(format!("{what}[{i}].name must not be empty")));
        }
        let name = skill.name.clone();
        if !set.add(skill) {
            console_warn(&format!(
                "toolnexus: skill {what}[{i}] skipped: duplicate name {name}"
            ));
        }
    }
    Ok(set)
}

/// The skills as a list, for the card.
pub fn skill_list(set: &SkillSet) -> Vec<Skill> {
    set.skills().to_vec()
}
