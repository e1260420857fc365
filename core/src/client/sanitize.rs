//! Tool-name sanitising shared by every toolnexus port.

/// Replaces every character outside `[a-zA-Z0-9_-]` with `_`, one `_` per
/// Unicode scalar value (so `"café"` becomes `"caf_"`, not `"caf__"`).
pub fn sanitize(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::sanitize;
    #[cfg(all(target_arch = "wasm32", target_os = "unknown"))]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    #[test]
    fn keeps_the_allowed_set_and_replaces_everything_else_per_scalar() {
        assert_eq!(sanitize("code-reviewer_2"), "code-reviewer_2");
        assert_eq!(sanitize("my agent.v2"), "my_agent_v2");
        assert_eq!(sanitize("café"), "caf_");
        assert_eq!(sanitize("😀x"), "_x");
        assert_eq!(sanitize(""), "");
    }
}
