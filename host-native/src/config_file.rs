//! The `--config` JSON file: `agents`, `a2a` and `llm` blocks.

use serde::Deserialize;
use serde_json::Value;
use std::collections::BTreeMap;
use toolnexus_core::server::A2aConfig;

/// The `a2a` block: the card identity plus the task store selector.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct A2aBlock {
    #[serde(flatten)]
    pub card: A2aConfig,
    /// `"memory"` or `"file:<dir>"`.
    pub store: Option<String>,
}

/// The `llm` block.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct LlmBlock {
    /// `"openai"`, `"anthropic"` or `"echo"`.
    pub style: Option<String>,
    pub base_url: Option<String>,
    pub model: Option<String>,
    /// The key itself (prefer `apiKeyEnv`).
    pub api_key: Option<String>,
    /// The environment variable holding the key.
    pub api_key_env: Option<String>,
    pub headers: BTreeMap<String, String>,
    pub system_prompt: Option<String>,
    pub max_turns: Option<u32>,
}

/// A parsed config file.
#[derive(Debug, Clone, Default)]
pub struct ConfigFile {
    /// The whole document (its `agents` key feeds the toolkit).
    pub raw: Value,
    pub a2a: A2aBlock,
    pub llm: Option<LlmBlock>,
}

impl ConfigFile {
    /// Reads and checks a config file; the error is one line naming the problem.
    pub fn load(path: &str) -> Result<ConfigFile, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read the config file {path}: {e}"))?;
        Self::parse(&text).map_err(|e| format!("the config file {path} {e}"))
    }

    /// Parses a config document.
    pub fn parse(text: &str) -> Result<ConfigFile, String> {
        let raw: Value =
            serde_json::from_str(text).map_err(|e| format!("is not valid JSON: {e}"))?;
        if !raw.is_object() {
            return Err("must be a JSON object with agents, a2a and llm keys".into());
        }
        if raw
            .get("agents")
            .is_some_and(|a| !a.is_object() && !a.is_null())
        {
            return Err("has an \"agents\" key that is not an object".into());
        }
        let block = |key: &str| raw.get(key).filter(|v| !v.is_null()).cloned();
        let a2a = match block("a2a") {
            Some(v) => {
                serde_json::from_value(v).map_err(|e| format!("has a bad \"a2a\" block: {e}"))?
            }
            None => A2aBlock::default(),
        };
        let llm = match block("llm") {
            Some(v) => Some(
                serde_json::from_value(v).map_err(|e| format!("has a bad \"llm\" block: {e}"))?,
            ),
            None => None,
        };
        Ok(ConfigFile { raw, a2a, llm })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_every_block() {
        let c = ConfigFile::parse(r#"{"agents": {"p": {"card": "http://x/c"}},
            "a2a": {"name": "desk", "version": "2.0.0", "provider": {"organization": "Acme", "url": "https://acme.example"},
                    "skills": ["greet"], "store": "file:/tmp/x"},
            "llm": {"style": "openai", "baseUrl": "http://127.0.0.1:9/v1", "model": "m", "apiKeyEnv": "KEY", "maxTurns": 3}}"#)
        .expect("config");
        assert_eq!(c.a2a.card.name.as_deref(), Some("desk"));
        assert_eq!(
            c.a2a
                .card
                .provider
                .as_ref()
                .map(|p| p.organization.as_str()),
            Some("Acme")
        );
        assert_eq!(c.a2a.card.skills, Some(vec!["greet".to_string()]));
        assert_eq!(c.a2a.store.as_deref(), Some("file:/tmp/x"));
        let llm = c.llm.expect("llm");
        assert_eq!(
            (llm.style.as_deref(), llm.max_turns),
            (Some("openai"), Some(3))
        );
    }

    #[test]
    fn bad_documents_are_one_clear_error() {
        assert!(ConfigFile::parse("nope")
            .unwrap_err()
            .contains("not valid JSON"));
        assert!(ConfigFile::parse("[1]")
            .unwrap_err()
            .contains("JSON object"));
        assert!(ConfigFile::parse(r#"{"a2a": {"name": 5}}"#)
            .unwrap_err()
            .contains("\"a2a\""));
        assert!(ConfigFile::parse(r#"{"llm": {"maxTurns": "x"}}"#)
            .unwrap_err()
            .contains("\"llm\""));
        assert!(ConfigFile::parse(r#"{"agents": [1]}"#)
            .unwrap_err()
            .contains("agents"));
        assert!(ConfigFile::parse("{}").is_ok());
    }
}
