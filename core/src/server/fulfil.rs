//! Ready-made fulfillers: the LLM tool loop over a toolkit, and echo.

use super::{FulfilRequest, Fulfiller};
use crate::llm::LlmConfig;
use crate::toolkit::Toolkit;
use crate::transport::{BoxFuture, Transport};
use std::sync::Arc;

/// Fulfils each task by running the LLM client loop on its text, with the
/// toolkit's tools (and skills prompt) offered to the model.
pub struct LlmFulfiller<T: Transport + 'static> {
    pub toolkit: Arc<Toolkit<T>>,
    pub llm: LlmConfig,
}

impl<T: Transport + 'static> Fulfiller for LlmFulfiller<T> {
    fn fulfil(&self, request: FulfilRequest) -> BoxFuture<'static, Result<String, String>> {
        let toolkit = self.toolkit.clone();
        let llm = self.llm.clone();
        Box::pin(async move {
            toolkit
                .run_llm(&llm, &request.text)
                .await
                .map(|r| r.text)
                .map_err(|e| format!("the model call failed: {e}"))
        })
    }
}

/// An offline model that answers every task with its own text. For trying a
/// server without an LLM; never used unless asked for.
pub struct EchoFulfiller;

impl Fulfiller for EchoFulfiller {
    fn fulfil(&self, request: FulfilRequest) -> BoxFuture<'static, Result<String, String>> {
        Box::pin(std::future::ready(Ok(request.text)))
    }
}

/// Shared fulfillers fulfil.
impl<F: Fulfiller + ?Sized> Fulfiller for Arc<F> {
    fn fulfil(&self, request: FulfilRequest) -> BoxFuture<'static, Result<String, String>> {
        (**self).fulfil(request)
    }
}
