//! Skills: SKILL.md parsing, the `skill` tool and the skills prompt.
