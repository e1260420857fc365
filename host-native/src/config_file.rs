//! The `--config` JSON file: `agents`, `a2a` and `llm` blocks.

use serde::Deserialize;
use serde_json::Value;
use std::collections::BTreeMap;
use toolnexus_core::server::auth::AuthConfig;
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

/// Why a config file was refused. Each variant keeps the error underneath
/// ([`source`](std::error::Error::source)); `Display` is one line naming the
/// problem (and the file, when it came from one).
#[non_exhaustive]
#[derive(Debug)]
pub enum ConfigError {
    /// The file could not be read.
    Read {
        path: String,
        source: std::io::Error,
    },
    /// The document is not JSON, or a block (`"a2a"`, `"llm"`) does not
    /// have its shape.
    Json {
        path: Option<String>,
        block: Option<&'static str>,
        source: serde_json::Error,
    },
    /// The document is JSON of the wrong shape.
    Shape {
        path: Option<String>,
        problem: &'static str,
    },
    /// The `a2a.auth` block is refused
    /// ([`AuthConfig::from_value`](toolnexus_core::server::auth::AuthConfig::from_value)
    /// says why: a key that is empty, an unknown algorithm, …).
    Auth {
        path: Option<String>,
        problem: String,
    },
}

impl ConfigError {
    /// The same error, naming the file it came from.
    fn in_file(self, file: &str) -> Self {
        match self {
            ConfigError::Json { block, source, .. } => ConfigError::Json {
                path: Some(file.to_string()),
                block,
                source,
            },
            ConfigError::Shape { problem, .. } => ConfigError::Shape {
                path: Some(file.to_string()),
                problem,
            },
            ConfigError::Auth { problem, .. } => ConfigError::Auth {
                path: Some(file.to_string()),
                problem,
            },
            read => read,
        }
    }
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (path, what) = match self {
            ConfigError::Read { path, source } => {
                return write!(f, "cannot read the config file {path}: {source}")
            }
            ConfigError::Json { path, .. }
            | ConfigError::Shape { path, .. }
            | ConfigError::Auth { path, .. } => (path, self),
        };
        if let Some(path) = path {
            write!(f, "the config file {path} ")?;
        }
        match what {
            ConfigError::Json {
                block: None,
                source,
                ..
            } => write!(f, "is not valid JSON: {source}"),
            ConfigError::Json {
                block: Some(block),
                source,
                ..
            } => write!(f, "has a bad \"{block}\" block: {source}"),
            ConfigError::Shape { problem, .. } => f.write_str(problem),
            ConfigError::Auth { problem, .. } => {
                write!(f, "has a bad \"a2a.auth\" block: {problem}")
            }
            ConfigError::Read { .. } => Ok(()),
        }
    }
}

impl std::error::Error for ConfigError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ConfigError::Read { source, .. } => Some(source),
            ConfigError::Json { source, .. } => Some(source),
            ConfigError::Shape { .. } | ConfigError::Auth { .. } => None,
        }
    }
}

impl ConfigFile {
    /// Reads and checks a config file; the error names the file and the problem.
    pub fn load(path: &str) -> Result<ConfigFile, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_string(),
            source,
        })?;
        Self::parse(&text).map_err(|e| e.in_file(path))
    }

    /// Parses a config document; `${NAME}` in `a2a.auth` reads the process environment.
    pub fn parse(text: &str) -> Result<ConfigFile, ConfigError> {
        Self::parse_with_env(text, |name| std::env::var(name).ok())
    }

    /// Parses a config document, `${NAME}` in `a2a.auth` read through `env`.
    pub fn parse_with_env(
        text: &str,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<ConfigFile, ConfigError> {
        let json = |block: Option<&'static str>| {
            move |source| ConfigError::Json {
                path: None,
                block,
                source,
            }
        };
        let shape = |problem| ConfigError::Shape {
            path: None,
            problem,
        };
        let raw: Value = serde_json::from_str(text).map_err(json(None))?;
        if !raw.is_object() {
            return Err(shape("must be a JSON object with agents, a2a and llm keys"));
        }
        if raw
            .get("agents")
            .is_some_and(|a| !a.is_object() && !a.is_null())
        {
            return Err(shape("has an \"agents\" key that is not an object"));
        }
        let block = |key: &str| raw.get(key).filter(|v| !v.is_null()).cloned();
        let mut a2a: A2aBlock = match block("a2a") {
            Some(v) => serde_json::from_value(v).map_err(json(Some("a2a")))?,
            None => A2aBlock::default(),
        };
        // The verifiers: read by core's reader, keys from the environment.
        if let Some(auth) = raw
            .get("a2a")
            .and_then(|a| a.get("auth"))
            .filter(|v| !v.is_null())
        {
            a2a.card.auth =
                Some(
                    AuthConfig::from_value(auth, env).map_err(|problem| ConfigError::Auth {
                        path: None,
                        problem,
                    })?,
                );
        }
        let llm = match block("llm") {
            Some(v) => Some(serde_json::from_value(v).map_err(json(Some("llm")))?),
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

    fn error_text(text: &str) -> String {
        ConfigFile::parse(text).unwrap_err().to_string()
    }

    #[test]
    fn bad_documents_are_one_clear_error() {
        assert!(error_text("nope").contains("not valid JSON"));
        assert!(error_text("[1]").contains("JSON object"));
        assert!(error_text(r#"{"a2a": {"name": 5}}"#).contains("\"a2a\""));
        assert!(error_text(r#"{"llm": {"maxTurns": "x"}}"#).contains("\"llm\""));
        assert!(error_text(r#"{"agents": [1]}"#).contains("agents"));
        assert!(ConfigFile::parse("{}").is_ok());
    }

    #[test]
    fn errors_keep_the_json_and_io_errors_under_them() {
        use std::error::Error as _;
        let err = ConfigFile::parse(r#"{"llm": {"maxTurns": "x"}}"#).unwrap_err();
        let cause = err.source().expect("the JSON error");
        assert!(cause.downcast_ref::<serde_json::Error>().is_some());
        assert!(ConfigFile::parse("[1]").unwrap_err().source().is_none());

        let missing = std::env::temp_dir().join(format!("no-such-config-{}", std::process::id()));
        let path = missing.display().to_string();
        let err = ConfigFile::load(&path).unwrap_err();
        assert!(
            err.to_string()
                .starts_with(&format!("cannot read the config file {path}: ")),
            "{err}"
        );
        let io = err
            .source()
            .and_then(|c| c.downcast_ref::<std::io::Error>());
        assert_eq!(
            io.map(std::io::Error::kind),
            Some(std::io::ErrorKind::NotFound)
        );
    }

    #[test]
    fn a_file_error_names_the_file_before_the_problem() {
        let dir = std::env::temp_dir().join(format!("config-error-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let file = dir.join("bad.json");
        std::fs::write(&file, r#"{"a2a": {"name": 5}}"#).expect("write");
        let path = file.display().to_string();
        let err = ConfigFile::load(&path).unwrap_err().to_string();
        assert!(
            err.starts_with(&format!("the config file {path} has a bad \"a2a\" block: ")),
            "{err}"
        );
        std::fs::write(&file, "[1]").expect("write");
        assert_eq!(
            ConfigFile::load(&path).unwrap_err().to_string(),
            format!("the config file {path} must be a JSON object with agents, a2a and llm keys")
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
