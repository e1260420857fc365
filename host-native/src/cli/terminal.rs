//! Peer text on the way to a terminal. A hostile peer's error message, card
//! or task may carry ANSI/OSC escape sequences (`ESC [`, `ESC ]`, the C1
//! `CSI` U+009B) that recolour, retitle, hide or fake what the user reads.
//! Every line the CLI writes for a person goes through [`line`]; every JSON
//! document through [`json`].

/// `text` with every control character (C0 but tab, DEL, C1) and every
/// bidirectional override shown as a visible `\u{..}` escape: one line, inert.
pub fn line(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if is_hazard(c) && c != '\t' {
            out.extend(c.escape_unicode());
        } else {
            out.push(c);
        }
    }
    out
}

/// JSON text with the characters `serde_json` leaves raw that a terminal
/// would act on (DEL, C1, bidirectional overrides) written as `\uXXXX`
/// escapes: the same JSON value, inert on a terminal. (It already escapes C0.)
pub fn json(text: String) -> String {
    if !text.chars().any(is_hazard) {
        return text;
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if is_hazard(c) && !matches!(c, '\n' | '\t' | '\r' | ' ') {
            out.push_str(&format!("\\u{:04x}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

fn is_hazard(c: char) -> bool {
    c.is_control() || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_are_shown_not_acted_on() {
        let hostile = "ok\u{1b}]0;pwned\u{7}\u{1b}[2J\u{9b}31m\r\nfake prompt$ \u{202e}txt.exe";
        let shown = line(hostile);
        assert!(!shown.chars().any(|c| c.is_control()), "{shown:?}");
        assert!(shown.contains("\\u{1b}]0;pwned"), "{shown}");
        assert!(!shown.contains('\u{202e}'));
        assert_eq!(line("plain\ttext é"), "plain\ttext é");
    }

    #[test]
    fn json_keeps_its_value_and_loses_its_hazards() {
        let v = serde_json::json!({"output": "a\u{1b}[31mred\u{9b}2J\u{7f}\u{2066}z"});
        let text = json(serde_json::to_string_pretty(&v).unwrap());
        assert!(
            !text.chars().any(|c| c.is_control() && c != '\n'),
            "{text:?}"
        );
        let back: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(back, v, "the same JSON value");
    }
}
