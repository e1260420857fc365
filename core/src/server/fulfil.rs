//! Ready-made fulfillers: the LLM tool loop over a toolkit, and echo.

use super::{FulfilRequest, Fulfiller, Progress};
use crate::client::toolkit::Toolkit;
use crate::host::transport::{BoxFuture, Transport};
use crate::llm::{LlmConfig, RunResult, ToolCall};
use crate::model::tool::ToolSource;
use crate::wire::http::{find_str, replace_str};
use crate::Error;
use std::sync::Arc;

/// Fulfils each task by running the LLM client loop on its text, with the
/// toolkit's tools (and skills prompt) offered to the model. Each tool call
/// is reported as a working status naming the tool.
pub struct LlmFulfiller<T: Transport + 'static> {
    pub toolkit: Arc<Toolkit<T>>,
    pub llm: LlmConfig,
}

impl<T: Transport + 'static> Fulfiller for LlmFulfiller<T> {
    fn fulfil(
        &self,
        request: FulfilRequest,
        progress: Progress,
    ) -> BoxFuture<'static, Result<String, String>> {
        let toolkit = self.toolkit.clone();
        let llm = self.llm.clone();
        Box::pin(async move {
            let report = |call: &ToolCall, source: Option<ToolSource>| {
                progress.status(tool_call_status(call, source));
            };
            let run = toolkit
                .run_llm_traced(
                    &llm,
                    &request.history,
                    &request.text,
                    true,
                    &report,
                    request.trace.as_ref(),
                )
                .await
                .map_err(|e| model_failure(&e, &llm))?;
            // A tool suspended the run (SPEC §10): the task waits for the
            // caller, never completes with the unanswered prompt.
            if let Some(pending) = &run.pending {
                match pending.get("kind").and_then(|k| k.as_str()) {
                    Some("authorization") => progress.auth_required(suspension_text(pending)),
                    _ => progress.input_required(suspension_text(pending)),
                }
            }
            Ok(run.text)
        })
    }
}

/// What the caller is asked when a tool suspends the run: the request's
/// prompt, and its link when it has one.
fn suspension_text(pending: &serde_json::Value) -> String {
    let prompt = pending["prompt"].as_str().unwrap_or_default();
    match pending.get("url").and_then(|u| u.as_str()) {
        Some(url) if !url.is_empty() && find_str(prompt, url).is_none() => {
            format!("{prompt}\n{url}")
        }
        _ => prompt.to_string(),
    }
}

/// The failed task's text when the model call fails: what went wrong, but
/// never the model's URL (remote callers read it; the endpoint is internal).
fn model_failure(e: &Error, llm: &LlmConfig) -> String {
    let mut text = format!("the model call failed: {e}");
    let base = llm.base_url.trim_end_matches('/').to_string();
    for url in [llm.endpoint(), base] {
        if !url.is_empty() {
            text = replace_str(&text, &url, "the model endpoint");
        }
    }
    text
}

/// What a working status says when the model calls `call` (a tool from `source`).
pub fn tool_call_status(call: &ToolCall, source: Option<ToolSource>) -> String {
    match source {
        Some(ToolSource::A2a) => format!("Asking the A2A agent tool {}", call.name),
        Some(ToolSource::Skill) => match call.arguments.get("name").and_then(|n| n.as_str()) {
            Some(skill) => format!("Loading the skill {skill}"),
            None => format!("Calling the tool {}", call.name),
        },
        _ => format!("Calling the tool {}", call.name),
    }
}

/// [`Toolkit::run_llm`], reporting every tool call through `progress`
/// before it runs (see [`tool_call_status`]).
pub async fn run_reporting<T: Transport>(
    toolkit: &Toolkit<T>,
    cfg: &LlmConfig,
    prompt: &str,
    progress: &Progress,
) -> Result<RunResult, Error> {
    let report = |call: &ToolCall, source: Option<ToolSource>| {
        progress.status(tool_call_status(call, source));
    };
    toolkit.run_llm_reporting(cfg, prompt, &report).await
}

/// An offline model that answers every task with its own text. For trying a
/// server without an LLM; never used unless asked for.
pub struct EchoFulfiller;

impl Fulfiller for EchoFulfiller {
    fn fulfil(
        &self,
        request: FulfilRequest,
        _progress: Progress,
    ) -> BoxFuture<'static, Result<String, String>> {
        Box::pin(std::future::ready(Ok(request.text)))
    }
}

/// Shared fulfillers fulfil.
impl<F: Fulfiller + ?Sized> Fulfiller for Arc<F> {
    fn fulfil(
        &self,
        request: FulfilRequest,
        progress: Progress,
    ) -> BoxFuture<'static, Result<String, String>> {
        (**self).fulfil(request, progress)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::LlmStyle;
    #[cfg(all(target_arch = "wasm32", target_os = "unknown"))]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    #[test]
    fn a_model_failure_never_names_the_model_url() {
        let llm = LlmConfig::new("http://10.0.0.7:11434/v1/", LlmStyle::OpenAi, "m");
        let errors = [
            Error::transport(format!(
                "LLM request to {} failed: connection refused",
                llm.endpoint()
            )),
            Error::Status {
                status: 502,
                url: llm.endpoint(),
                body: "bad gateway".into(),
            },
            Error::malformed("the reply from http://10.0.0.7:11434/v1 is not JSON"),
        ];
        for e in errors {
            let text = model_failure(&e, &llm);
            assert!(!text.contains("10.0.0.7"), "{text}");
            assert!(text.starts_with("the model call failed: "), "{text}");
        }
        let text = model_failure(
            &Error::Status {
                status: 401,
                url: llm.endpoint(),
                body: "invalid key".into(),
            },
            &llm,
        );
        assert_eq!(
            text,
            "the model call failed: HTTP 401 from the model endpoint: invalid key"
        );
    }
}
