//! The LLM client loop (OpenAI and Anthropic styles) as a state machine.
